"""TIRMathAgent: tool-integrated reasoning for maths. The model reasons in text and writes Python where a
computation helps; each program runs in the sandboxed code interpreter and its output is written into the
answer, and the model goes on from there.

    bot = TIRMathAgent(llm={'model': 'qwen2.5-math-72b-instruct', 'model_server': 'dashscope'},
                       system_message='Integrate step-by-step reasoning and Python code; put the answer in \\\\boxed{}.')
    bot.run_nonstream([{'role': 'user', 'content': 'What is the sum of the first 10 Fibonacci numbers?'}])

The response is one assistant message that grows: the model's text up to a complete ```python block (the
model is stopped at "```output"), then "```output\\n<what the program printed>\\n```", then the model
continuing that same message, until it writes no more code (or `max_llm_calls`, default 10, are used).
`code_interpreter` is the sandbox's settings (see `chatagent.tools.code_interpreter`); programs of one run
share a session, so variables persist between them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

from chatagent.agents.fncall import FnCallAgent
from chatagent.llm.fncall_prompt import with_stop_words
from chatagent.schema import ASSISTANT, Message, content_text
from chatagent.stream import fragment

OBS_START = "```output"
OBS_END = "\n```\n"
TOOL = "code_interpreter"
_SECTION = re.compile(r"^(stdout|stderr|result|error):\n", re.M)


class TIRMathAgent(FnCallAgent):
    """Reasons with programs run in a sandbox (see the module docstring).

    Args:
        llm, system_message, name, description: see Agent.
        code_interpreter: settings of the sandbox, e.g. `{'timeout': 10}`.
        max_llm_calls: model calls per run (default 10).
    """

    def __init__(
        self,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        *,
        code_interpreter: dict | None = None,
        max_llm_calls: int = 10,
        **kwargs: Any,
    ) -> None:
        tool = {"name": TOOL, **(code_interpreter or {})}
        super().__init__([tool], llm, system_message, name, description, max_llm_calls=max_llm_calls, **kwargs)
        self.extra_generate_cfg = with_stop_words(self.extra_generate_cfg, [OBS_START])

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        text_messages = [m if isinstance(m.content, str) else m.copy(content=m.text) for m in messages]
        answer = ""  # the response's one message so far
        kwargs.setdefault("session_id", f"tir-{uuid.uuid4().hex}")  # programs of this run share one session
        for _ in range(self.max_llm_calls):
            context = text_messages + ([Message._make(ASSISTANT, answer)] if answer else [])
            reply = yield from _cut_at(self._call_llm(context), OBS_START)
            written = "".join(content_text(m.content) for m in reply if m.function_call is None)
            answer += written
            program = extract_program(written)
            if not program:
                return
            result = self._call_tool(TOOL, json.dumps({"code": program}), messages=messages, **kwargs)
            block = ("" if answer.endswith("\n") else "\n") + f"{OBS_START}\n{plain_output(result)}{OBS_END}"
            answer += block
            yield [fragment(Message._make(ASSISTANT, block), 0)]


def extract_program(text: str) -> str:
    """The last complete ```python block of `text` ('' when there is none, or the last one is unfinished)."""
    program, inside = "", False
    for line in text.split("\n"):
        if line.startswith("```python") or line.endswith("```python"):
            program, inside = "", True
        elif line.startswith("```"):
            inside = False
        elif inside:
            program += line + "\n"
    return "" if inside else program


def plain_output(result: Any) -> str:
    """The code interpreter's result as a program's output: what it printed and its value, without labels."""
    text = content_text(result) if isinstance(result, list) else str(result)
    return _SECTION.sub("", text).strip()


def _cut_at(stream: Iterator[list[Message]], stop: str) -> Iterator[list[Message]]:
    """The fragments of `stream` (at index 0) with its text ended before `stop`, for a server that ignores
    stop words; returns the reply as written. A suffix that may begin `stop` is held back until it cannot."""
    held, done, written = "", False, []
    try:
        for fragments in stream:
            out = []
            for f in fragments:
                if done or not isinstance(f.content, str) or not f.content:
                    if not done and (f.reasoning_content or f.function_call is not None):
                        out.append(f)
                    continue
                text = held + f.content
                cut = text.find(stop)
                if cut >= 0:
                    text, held, done = text[:cut], "", True
                else:
                    keep = _partial_suffix(text, stop)
                    text, held = text[: len(text) - keep], text[len(text) - keep :]
                if text:
                    written.append(text)
                    out.append(f.copy(content=text))
            if out:
                yield out
            if done:
                break
    finally:
        stream.close()  # type: ignore[attr-defined]
    if held:
        written.append(held)
        yield [fragment(Message._make(ASSISTANT, held), 0)]
    return [Message._make(ASSISTANT, "".join(written))]


def _partial_suffix(text: str, stop: str) -> int:
    """The length of the longest end of `text` that is a beginning of `stop`."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0


__all__ = ["TIRMathAgent", "extract_program", "plain_output"]
