"""Stop a small model that has begun to repeat itself, without penalising what it copies from the prompt.

Repetition penalties (llama.cpp's `repeat_penalty`, DRY) look back over the prompt's end too, so strong
ones also stop a model from quoting the excerpts it was given ("the code is 73914"), and weak ones do not
stop the loops a 135M model falls into. `LoopGuard` watches only the answer: once REPEAT_RUN words in a
row each continue a REPEAT_WORDS-word sequence the answer already holds, the answer is looping and the
stream is ended (`extra['stop_reason'] = 'repetition'`); so is an answer that goes round in circles with
small changes, once fewer than MIN_DISTINCT of its 4-word sequences are new (after MIN_WORDS words), and so is
one that counts ("le 75, le 76, le 77, ..."): a unit of at most COUNT_UNIT words, the same but for its numbers,
which go up (or down) by the same step each time, COUNT_RUN times in a row. A numbered list is no count: its
items are longer than COUNT_UNIT words, or differ in more than their numbers. The cost is two tuple hashes and
a few comparisons per word.

A small model may also recite its instructions instead of answering. `EchoGuard` watches for ECHO_WORDS words
in a row of the system message: the recital is then taken back (the answer is replaced by what came before
it) and the stream ended (`extra['stop_reason'] = 'prompt_echo'`).

A short answer to a question also runs on after it is complete: a small model asked for "one or two sentences"
says the answer, then copies on through its passage or says it again in other words, to the token limit.
`AnswerGuard` judges the answer sentence by sentence against the question's content words: once a sentence has
answered (it holds one of them), the first later sentence that drifts (holds none) or repeats (ANSWER_REPEAT of
its content words were said already) is taken back and the stream ended; it is the answer's natural end, so no
stop reason is set.

`LoopStop` is the guards as one reply filter: the embedded model reads `chat()`'s stream and `achat()`'s through it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from chatagent.llm.pumps import ReplyFilter
from chatagent.schema import ASSISTANT
from chatagent.schema.fragment import Fragment
from chatagent.schema.stop_reason import StopReason

logger = logging.getLogger("chatagent.llm")

REPEAT_WORDS = 8  # a sequence this long seen twice in one answer is a repeat...
REPEAT_RUN = 8  # ...and this many such sequences in a row (15 words copied verbatim) is a loop
MIN_WORDS = 50  # an answer this long...
MIN_DISTINCT = 0.6  # ...whose 4-word sequences are less than this share distinct is a loop
COUNT_UNIT = 3  # a unit of at most this many words...
COUNT_RUN = 16  # ...repeated this many times in a row, its numbers counting, is a loop
ANSWER_REPEAT = 0.6  # a sentence this share of whose content words the answer said already repeats it
ECHO_WORDS = 8  # this many words of the system message in a row, in its order, is a recital
_WORD = re.compile(r"\S+")
_NUMBER = re.compile(r"\d+")
_EDGES = "\"'`*_()[]{}<>.,;:!?"


class LoopGuard:
    """Feed it an answer's text as it streams; `add` returns True once the answer repeats itself."""

    __slots__ = ("words", "seen", "run", "partial", "fours", "shapes", "counting")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.shapes: list[tuple[str, int | None]] = []  # each word with its digits as '#', and its first number
        self.counting = [0] * (COUNT_UNIT + 1)  # per unit length: words in a row that continue a count
        self.seen: set[tuple[str, ...]] = set()
        self.fours: set[tuple[str, ...]] = set()  # the distinct 4-word sequences
        self.run = 0  # repeated sequences in a row
        self.partial = ""  # a word cut by the end of the last piece

    def add(self, text: str) -> bool:
        """Take the next piece of the answer; True when the answer has started to loop."""
        text = self.partial + text
        parts = text.split()
        self.partial = parts.pop() if parts and not text[-1].isspace() else ""
        words = self.words
        for word in parts:
            words.append(word)
            if self._counts(word):
                return True
            n = len(words)
            if n >= 4:
                self.fours.add(tuple(words[-4:]))
                if n >= MIN_WORDS and len(self.fours) < MIN_DISTINCT * (n - 3):
                    return True
            if n < REPEAT_WORDS:
                continue
            gram = tuple(words[-REPEAT_WORDS:])
            if gram in self.seen:
                self.run += 1
                if self.run >= REPEAT_RUN:
                    return True
            else:
                self.seen.add(gram)
                self.run = 0
        return False

    def _counts(self, word: str) -> bool:
        """Whether `word` makes the answer's end a count: COUNT_RUN units of u <= COUNT_UNIT words in a row, each
        the one before with its numbers one step on."""
        number = _NUMBER.search(word)
        shapes = self.shapes
        shapes.append((_NUMBER.sub("#", word), int(number.group()) if number else None))
        n = len(shapes)
        shape, value = shapes[-1]
        for u in range(1, COUNT_UNIT + 1):
            if n <= u or shapes[-1 - u][0] != shape:
                self.counting[u] = 0
                continue
            before = shapes[-1 - u][1]
            if value is not None and before is not None:  # a number: one step on from the unit before, same step
                step = value - before
                if step == 0 or (
                    n > 2 * u and (earlier := shapes[-1 - 2 * u][1]) is not None and before - earlier != step
                ):
                    self.counting[u] = 0
                    continue
            self.counting[u] += 1
            if self.counting[u] >= u * (COUNT_RUN - 1) and any(v is not None for _, v in shapes[-u:]):
                return True
        return False


class EchoGuard:
    """Feed it an answer's text as it streams; `add` returns True once the answer recites `prompt` (ECHO_WORDS of
    its words in a row, in its order, case and punctuation aside). `start` is then where the recital begins in
    `text`, the answer so far."""

    __slots__ = ("grams", "text", "done", "words", "start")

    def __init__(self, prompt: str) -> None:
        words = [_plain(w) for w in _WORD.findall(prompt)]
        self.grams = {tuple(words[i : i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)}
        self.text = ""
        self.done = 0  # the answer's text up to here is read into `words`
        self.words: list[tuple[str, int]] = []  # the answer's words and where each begins
        self.start = -1

    def add(self, text: str) -> bool:
        """Take the next piece of the answer; True when the answer has begun to recite the prompt."""
        self.text += text
        if not self.grams:
            return False
        for m in _WORD.finditer(self.text, self.done):
            if m.end() == len(self.text):  # perhaps cut: read it with the next piece
                break
            self.done = m.end()
            self.words.append((_plain(m.group()), m.start()))
            gram = tuple(w for w, _ in self.words[-ECHO_WORDS:])
            if len(gram) == ECHO_WORDS and gram in self.grams:
                self.start = self.words[-ECHO_WORDS][1]
                return True
        return False


_SENTENCE_END = re.compile(r"[.!?](?=\s)|[\u3002\uff01\uff1f\n]")
_LETTERS = re.compile(r"[^\W\d_]{2,}")  # a word of two letters or more, in any alphabet but CJK's
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_FUNCTION_WORDS = frozenset({
    "the", "an", "is", "are", "was", "were", "be", "been", "what", "which", "who", "whom", "how", "why", "when",
    "where", "do", "does", "did", "can", "could", "should", "would", "will", "shall", "may", "might", "must", "my",
    "me", "you", "your", "it", "its", "this", "that", "these", "those", "of", "in", "on", "to", "for", "with", "and",
    "or", "not", "by", "from", "as", "at", "if", "there", "their", "them", "they", "we", "our", "us", "he", "she",
    "his", "her", "here", "about", "into", "than", "then", "so", "such", "some", "any", "all",
})  # fmt: skip


def content_words(text: str) -> set[str]:
    """What a sentence is about, to compare it with another: its words but function words, each by its first five
    letters (so "factor" and "factors" are one), and each pair of Chinese characters."""
    words = {w[:5] for w in (m.lower() for m in _LETTERS.findall(_CJK.sub(" ", text))) if w not in _FUNCTION_WORDS}
    for run in _CJK.findall(text):
        words.update(run[i : i + 2] for i in range(len(run) - 1))
    return words


class AnswerGuard:
    """Feed it an answer to `question` as it streams; `add` returns where the answer's text should end (its first
    sentence past the complete answer that drifts or repeats, see the module) or -1. Lines in a code fence are
    not judged."""

    __slots__ = ("asked", "text", "done", "said", "answered")

    def __init__(self, question: str) -> None:
        self.asked = content_words(question)
        self.text = ""
        self.done = 0  # the answer's sentences up to here are judged
        self.said: set[str] = set()  # the content words of the sentences kept
        self.answered = False

    def add(self, text: str) -> int:
        """Take the next piece of the answer; the index in the answer's text where it should end, or -1."""
        self.text += text
        if not self.asked:
            return -1
        for m in _SENTENCE_END.finditer(self.text, self.done):
            start, self.done = self.done, m.end()
            words = content_words(self.text[start : m.end()])
            if not words or self.text.count("```", 0, start) % 2:
                continue
            if self.answered and (not words & self.asked or len(words & self.said) >= ANSWER_REPEAT * len(words)):
                return start
            self.answered = self.answered or bool(words & self.asked)
            self.said |= words
        return -1


def _plain(word: str) -> str:
    return word.strip(_EDGES).lower()


class LoopStop(ReplyFilter):
    """The guards on one answer, as a reply filter (`run` for a stream, `arun` for an async one, the same checks):
    once the answer's text at index 0 loops or recites `prompt` (the system message), the stream is ended (and
    closed) and the answer carries `extra['stop_reason']`: 'repetition' or 'prompt_echo' (and the recital is taken
    back: a fragment replaces the answer with what came before it). Given the `question` it answers, it also ends
    the answer where it is complete (`AnswerGuard`: the sentence past it taken back the same way)."""

    __slots__ = ("guard", "echo", "answer")

    def __init__(self, prompt: str = "", question: str = "") -> None:
        self.guard = LoopGuard()
        self.echo = EchoGuard(prompt)
        self.answer = AnswerGuard(question) if question else None

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        for f in fragments:
            content = f.content
            if f.index != 0 or not isinstance(content, str) or not content:
                continue
            if self.echo.add(content):
                logger.info("the model recites its instructions: the recital was taken back")
                kept = self.echo.text[: self.echo.start].rstrip()
                self.stopped = True
                return [
                    *fragments,
                    Fragment(ASSISTANT, kept, extra={"stop_reason": StopReason.PROMPT_ECHO}, index=0, replace=True),
                ]
            if self.guard.add(content):
                logger.info("the model repeats itself: its answer was ended after %d words", len(self.guard.words))
                self.stopped = True
                return [*fragments, Fragment(ASSISTANT, "", extra={"stop_reason": StopReason.REPETITION}, index=0)]
            if self.answer is not None and (end := self.answer.add(content)) >= 0:
                logger.info("the answer was complete: the sentence after it (drifting or repeating) was taken back")
                self.stopped = True
                return [*fragments, Fragment(ASSISTANT, self.answer.text[:end].rstrip(), index=0, replace=True)]
        return fragments

    def end(self) -> list[Fragment]:
        return []


def stop_loops(stream: Iterator[list[Fragment]], prompt: str = "") -> Iterator[list[Fragment]]:
    """`stream` through a `LoopStop` on `prompt`."""
    return LoopStop(prompt).run(stream)
