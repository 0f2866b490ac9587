"""GroupChatAutoRouter: the host of a group chat. Given the conversation, it names who speaks next.

    host = GroupChatAutoRouter(agents=[alice, bob], llm=cfg, background='A design review.')
    answer = host.run_nonstream(conversation)[-1]['content']        # 'Bob', or '[STOP]'
    host.choose(conversation)                                        # 'Bob', or None for [STOP]

The model sees the participants' names and descriptions and the latest messages as a transcript
("Name: text", each shortened), and answers with one name or `[STOP]`. Every message should carry its
speaker's `name`; one without is shown under its role. It is a FnCallAgent: with `function_list`, the host
may use tools before it names someone. `GroupChat(selection='auto')` asks one of these each turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.fncall import FnCallAgent
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, Message, content_text, to_messages
from chatagent.utils.tokens import truncate_tokens

STOP = "[STOP]"
HOST_TRANSCRIPT_MESSAGES = 30  # the host reads at most this many latest messages
HOST_MESSAGE_TOKENS = 400  # each shortened to about this many tokens

HOST_SYSTEM = {
    "en": "You are the host of a group chat. You decide who speaks next; you never speak yourself.",
    "zh": "你是一个群聊的主持人。你决定下一位发言者，自己不发言。",
}
HOST_PROMPT = {
    "en": (
        "{background}Participants:\n{roster}\n\nConversation so far:\n{transcript}\n\n"
        "Who should speak next? Answer with exactly one name from: {names}. "
        "Answer [STOP] if the conversation has reached its goal or should end."
    ),
    "zh": (
        "{background}参与者：\n{roster}\n\n目前的对话：\n{transcript}\n\n"
        "下一位应该由谁发言？只回答一个名字，从以下名字中选：{names}。"
        "如果对话已达到目的或应当结束，回答 [STOP]。"
    ),
}
HOST_BACKGROUND = {"en": "Background: {}\n\n", "zh": "背景：{}\n\n"}
EMPTY_TRANSCRIPT = {"en": "(nothing yet)", "zh": "（尚无发言）"}


class GroupChatAutoRouter(FnCallAgent):
    """Names the next speaker of a group chat (see the module docstring).

    Args:
        agents: the participants, each with a `name` (and ideally a `description`).
        background: what the chat is about.
        function_list, llm, system_message, name, description, ...: see FnCallAgent.
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        agents: list[Agent] | None = None,
        name: str | None = None,
        description: str | None = None,
        background: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, name=name, description=description, **kwargs)
        if not agents:
            raise ValueError("GroupChatAutoRouter needs the participants: agents=[...]")
        self.agents = list(agents)
        self.names: list[str] = [a.name for a in self.agents if a.name]
        self.background = background

    async_safe = True  # its _run only builds the host's prompt, then runs FnCallAgent's
    fragment_native = True

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        lang = lang if lang in HOST_PROMPT else "en"
        prompt = HOST_PROMPT[lang].format(
            background=HOST_BACKGROUND[lang].format(self.background) if self.background else "",
            roster=roster(self.agents),
            transcript=self._transcript(messages, lang),
            names=", ".join(self.names),
        )
        system = HOST_SYSTEM[lang]
        if self.system_message:  # the host's own instructions (the conversation's system message is not shown)
            system = self.system_message + "\n\n" + system
        host_messages = [Message.unchecked(SYSTEM, system), Message.unchecked(USER, prompt)]
        return (yield from super()._run(host_messages, lang=lang, **kwargs))

    def _transcript(self, conversation: list[Message], lang: str) -> str:
        lines = []
        for m in conversation[-HOST_TRANSCRIPT_MESSAGES:]:
            if m.role in (SYSTEM, FUNCTION) or m.function_call is not None:
                continue
            text = truncate_tokens(content_text(m.content).strip(), HOST_MESSAGE_TOKENS)
            lines.append(f"{m.name or m.role}: {text}")
        return "\n".join(lines) or EMPTY_TRANSCRIPT[lang]

    def choose(self, conversation: list[dict] | list[Message], lang: str | None = None) -> str | None:
        """Ask the host: a participant's name, or None when it answered [STOP] or named nobody."""
        answer = final_text(to_messages(self.run_nonstream(conversation, lang=lang))) if conversation else ""
        choice = parse_host_answer(answer, self.names)
        return None if choice == STOP else choice


def final_text(turn: list[Message]) -> str:
    """The host's answer: the text of its turn's last assistant message (after any tool calls and results)."""
    return next((m.text for m in reversed(turn) if m.role == ASSISTANT and m.function_call is None), "")


def roster(agents: list[Agent]) -> str:
    """'- Name: description' lines."""
    return "\n".join(f"- {a.name}: {a.description or ''}".rstrip(": ") for a in agents)


def bounded(name: str) -> str:
    """A regex for `name` that does not match inside a longer ASCII word."""
    pattern = re.escape(name)
    if name[:1].isascii() and (name[:1].isalnum() or name[:1] == "_"):
        pattern = r"(?<![A-Za-z0-9_])" + pattern
    if name[-1:].isascii() and (name[-1:].isalnum() or name[-1:] == "_"):
        pattern += r"(?![A-Za-z0-9_])"
    return pattern


_HOST_STRIP = " \t\r\n*`'\"“”‘’「」『』[]()（）<>.,。，!！:："
_STOP_ANSWER = re.compile(r"^\W*stop\W*$", re.IGNORECASE)


def parse_host_answer(answer: str, names: list[str]) -> str | None:
    """The host's choice: a name from `names`, STOP, or None when the answer names nobody (or several)."""
    bare = answer.strip().strip(_HOST_STRIP)
    for n in names:
        if bare.lower() == n.lower():
            return n
    if _STOP_ANSWER.match(answer) or STOP.lower() in answer.lower():
        return STOP
    found = [n for n in names if re.search(bounded(n), answer, re.IGNORECASE)]
    # a name found inside a longer one ("Bob" in "Bobby Tables") is not a second choice
    found = [n for n in found if not any(n != o and n.lower() in o.lower() for o in found)]
    return found[0] if len(found) == 1 else None


__all__ = ["GroupChatAutoRouter", "STOP", "final_text", "parse_host_answer", "roster"]
