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
from chatagent.run.requests import View
from chatagent.schema import ASSISTANT, Message, content_text
from chatagent.schema.fragment import fragment

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
        code_interpreter: dict[str, Any] | None = None,
        max_llm_calls: int = 10,
        **kwargs: Any,
    ) -> None:
        tool = {"name": TOOL, **(code_interpreter or {})}
        super().__init__([tool], llm, system_message, name, description, max_llm_calls=max_llm_calls, **kwargs)
        self.extra_generate_cfg = with_stop_words(self.extra_generate_cfg, [OBS_START])

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        text_messages = [m if isinstance(m.content, str) else m.copy(content=m.text) for m in messages]
        answer = ""  # the response's one message so far
        kwargs.setdefault("session_id", f"tir-{uuid.uuid4().hex}")  # programs of this run share one session
        for _ in range(self.max_llm_calls):
            context = text_messages + ([Message.unchecked(ASSISTANT, answer)] if answer else [])
            view = StopAt(OBS_START)
            yield from self._call_llm(context, view=view)
            tail = view.finish()
            if tail:
                yield tail
            answer += view.text
            program = extract_program(view.text)
            if not program:
                return
            result = self._call_tool(TOOL, json.dumps({"code": program}), messages=messages, **kwargs)
            block = ("" if answer.endswith("\n") else "\n") + f"{OBS_START}\n{plain_output(result)}{OBS_END}"
            answer += block
            yield [fragment(Message.unchecked(ASSISTANT, block), 0)]


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


class StopAt(View):
    """A view of a model reply (at index 0) that ends its text before `stop`, for servers that ignore stop
    words: a suffix that may begin `stop` is held back until it cannot; `text` is what was shown."""

    def __init__(self, stop: str) -> None:
        self.stop = stop
        self.done = False  # True once `stop` was seen: the model's stream ends there
        self.held = ""
        self.parts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, fragments: list[Message]) -> list[Message]:
        out = []
        for f in fragments:
            if self.done:
                break
            if not isinstance(f.content, str) or not f.content:
                if f.reasoning_content or f.function_call is not None:
                    out.append(f)
                continue
            text = self.held + f.content
            cut = text.find(self.stop)
            if cut >= 0:
                text, self.held, self.done = text[:cut], "", True
            else:
                keep = _partial_suffix(text, self.stop)
                text, self.held = text[: len(text) - keep], text[len(text) - keep :]
            if text:
                self.parts.append(text)
                out.append(f.copy(content=text))
        return out

    def finish(self) -> list[Message]:
        """After the stream: the held-back text, if any, as a fragment to show."""
        held, self.held = self.held, ""
        if not held:
            return []
        self.parts.append(held)
        return [fragment(Message.unchecked(ASSISTANT, held), 0)]


def _partial_suffix(text: str, stop: str) -> int:
    """The length of the longest end of `text` that is a beginning of `stop`."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0


__all__ = ["StopAt", "TIRMathAgent", "extract_program", "plain_output"]
