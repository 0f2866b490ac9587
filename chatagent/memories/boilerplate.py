"""Answers not worth remembering: disclaimers, refusals, "I don't know", and acknowledgements that add nothing.

    is_boilerplate("I'm sorry, but as an AI I don't know your food restrictions.")    # True
    is_boilerplate("Noted: no peanuts.", question="I'm allergic to peanuts.")          # True: nothing new
    is_boilerplate("Lisbon's trams stop at midnight; take a taxi back.")               # False

An assistant's answer is a memory only when the memory keeps answers at all (`LongTermMemory(keep_answers=True)`)
and it says something: stored, a model's "as an AI…" is recalled for every question near its words and crowds out
what the user said (three copies of it once came back for "food restrictions", and not the peanut allergy). An
answer is boilerplate when it holds a disclaimer or a refusal (English or Chinese), or when its words, the
question's words and a list of courtesies aside, leave nothing (words as keyword search makes them; Chinese by
its characters, as `chatagent.rag.analysis.word_units` counts them).
"""

from __future__ import annotations

import re
from functools import lru_cache

from chatagent.rag.analysis import analyze, word_units

__all__ = ["is_boilerplate"]

_DISCLAIMERS = re.compile(
    r"\bas an? (?:ai|a\.i\.|artificial intelligence|(?:large )?language model|ai (?:language )?model|ai assistant"
    r"|virtual assistant|chatbot)\b"
    r"|\bi(?:'m|’m| am) (?:only |just )?an? (?:ai|artificial intelligence|(?:large )?language model|virtual assistant"
    r"|chatbot)\b"
    r"|\bi (?:do not|don't|don’t|cannot|can't|can’t) (?:have (?:access|personal|the ability|any (?:information|way))"
    r"|know|remember|recall|access|browse|help with that|assist with that)\b"
    r"|\bi(?:'m|’m| am) (?:sorry|afraid),? (?:but )?i (?:can(?:not|'t|’t)|am unable|(?:'m|’m) unable|(?:'m|’m) not able)"
    r"|\bi(?:'m|’m| am) (?:not sure|unable to|not able to)\b"
    r"|作为(?:一个|一名)?(?:人工智能|AI|ai|语言模型|AI助手|智能助手)|我(?:只)?是(?:一个)?(?:人工智能|AI|语言模型|AI助手)"
    r"|(?:抱歉|对不起|很遗憾)[，,]?\s*我(?:无法|不能|没有办法|不知道)|我(?:不知道|无法访问|无法回答|没有(?:权限|能力))",
    re.IGNORECASE,
)

_COURTESIES = """Noted. OK, okay, sure, yes, got it, understood, thanks, thank you, you're welcome, glad to help,
happy to help, great, of course, no problem, I'll remember that, I will keep that in mind, anytime, alright,
certainly, absolutely, enjoy, have fun, good luck, sounds good, perfect, wonderful, awesome, cool, nice, lovely,
amazing, congratulations, hello, hi, hey, good morning, good night, goodbye, bye, see you, take care, let me know
if there is anything else I can do, feel free to ask, how can I help you today, is there anything else, me, tell,
anything, else, know, ask, help, assist, question, questions
好的，好，明白了，了解，收到，谢谢，感谢，不客气，我会记住的，记住了，我记住了，没问题，当然，当然可以，祝你玩得开心，
祝你好运，祝你一切顺利，一路顺风，旅途愉快，加油，太好了，很好，不错，你好，您好，再见，有什么需要随时告诉我，还有什么可以帮您，请问还有什么问题"""


@lru_cache(maxsize=1)
def _courtesy_units() -> frozenset[str]:
    return frozenset(word_units(analyze(_COURTESIES)))


def is_boilerplate(answer: str, question: str = "") -> bool:
    """Whether the assistant's `answer` (to `question`) is not worth remembering (see the module docstring)."""
    text = " ".join(answer.split())
    if not text or _DISCLAIMERS.search(text):
        return True
    said = word_units(analyze(text)) - _courtesy_units() - word_units(analyze(question))
    return not said
