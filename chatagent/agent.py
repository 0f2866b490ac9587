"""Agent: the run() template every agent shares.

`run()` copies and normalises the input, detects the language, merges the agent's system message,
calls the subclass's `_run()` and turns what it yields into what the caller asked for: dicts if the
caller gave dicts, Messages if it gave Messages; the whole response so far on each yield (cumulative,
the default) or only what is new (`delta_stream=True`).

A subclass's `_run(messages, lang, **kwargs)` yields *fragments* (see `chatagent.stream`): lists of
Messages each carrying `extra['index']`, its position in this run's response. `_call_llm()` yields
them ready-made and returns the model's complete reply, so a tool loop reads:

    reply = yield from self._call_llm(messages, functions, start=len(response))
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.base import BaseChatModel, Usage, get_chat_model
from chatagent.schema import SYSTEM, USER, ContentItem, Message, content_text, to_messages
from chatagent.stream import INDEX, Collector, Response, collect

logger = logging.getLogger("chatagent.agent")

_CJK = re.compile(r"[\u4e00-\u9fff]")
_local = threading.local()


def detect_lang(messages: list[Message]) -> str:
    """'zh' when the latest user message has Chinese characters, else 'en'."""
    for m in reversed(messages):
        if m.role == USER:
            return "zh" if _CJK.search(content_text(m.content)) else "en"
    return "en"


class RunContext:
    """Per-run state, readable while and after the run: token usage, the deadline."""

    __slots__ = ("usage", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self.usage = Usage()
        self.deadline = deadline  # time.monotonic() value, or None

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunDeadlineExceeded("the run went past its deadline")


def current_run() -> RunContext:
    """The context of the run whose code is executing in this thread (a fresh one outside any run)."""
    ctx = getattr(_local, "run", None)
    return ctx if ctx is not None else RunContext()


class Run(Iterator[list]):
    """The iterator `Agent.run()` returns. Iterate it; `usage` holds the tokens used so far.

    Closing it (or dropping it) closes the model stream underneath.
    """

    __slots__ = ("_gen", "context")

    def __init__(self, gen: Iterator[list], context: RunContext) -> None:
        self._gen = gen
        self.context = context

    @property
    def usage(self) -> Usage:
        return self.context.usage

    def __iter__(self) -> Run:
        return self

    def __next__(self) -> list:
        prev = getattr(_local, "run", None)
        _local.run = self.context
        try:
            return next(self._gen)
        finally:
            _local.run = prev

    def close(self) -> None:
        prev = getattr(_local, "run", None)
        _local.run = self.context
        try:
            self._gen.close()
        finally:
            _local.run = prev


class Agent:
    """Base of all agents. Subclasses implement `_run`.

    Args:
        llm: a model config dict, a BaseChatModel, or None for the default (see `default_llm_config`).
        system_message: put before the conversation (merged into the caller's system message if any).
        name, description: how other agents and the UI refer to this one.
        function_list: tools (used by the agents that call tools).
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: dict | BaseChatModel | None = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._llm_cfg = llm
        self._llm: BaseChatModel | None = llm if isinstance(llm, BaseChatModel) else None
        self.system_message = system_message
        self.name = name
        self.description = description
        self.extra_generate_cfg: dict = dict(kwargs.pop("generate_cfg", None) or {})
        self.function_list = list(function_list or [])
        self._init_lock = threading.Lock()

    @property
    def llm(self) -> BaseChatModel:
        """The model, built from the config on first use."""
        if self._llm is None:
            with self._init_lock:
                if self._llm is None:
                    self._llm = get_chat_model(self._llm_cfg)
        return self._llm

    # ---- the template ----------------------------------------------------------------------------------

    def run(
        self,
        messages: Iterable[dict | Message],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> Run:
        """Answer `messages`; iterate the result for the response as it grows.

        Each yield is a list: the whole response so far, or with `delta_stream=True` only the new
        fragments (each with `extra['index']`; fold them with `chatagent.merge_delta`). `deadline`
        is a time limit in seconds for the whole run. The caller's messages are never modified.
        """
        fragments, as_dicts, context = self._start(messages, lang, deadline, kwargs)
        gen = self._deltas(fragments, as_dicts) if delta_stream else self._cumulative(fragments, as_dicts)
        return Run(gen, context)

    def run_nonstream(
        self,
        messages: Iterable[dict | Message],
        *,
        lang: str | None = None,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> list:
        """The final response at once: equal to the last yield of `run()`."""
        fragments, as_dicts, context = self._start(messages, lang, deadline, kwargs)
        response = collect(Run(self._deltas(fragments, False), context))
        return [m.model_dump() for m in response] if as_dicts else response

    def _start(
        self, messages: Iterable[dict | Message], lang: str | None, deadline: float | None, kwargs: dict
    ) -> tuple[Iterator[list[Message]], bool, RunContext]:
        """Normalise the input (a copy) and start `_run`: its fragment stream, the output type, the context."""
        if isinstance(messages, (dict, str, bytes, Message)):
            raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        as_dicts = not messages or not all(isinstance(m, Message) for m in messages)
        msgs = to_messages(messages)
        if not msgs:
            raise ValueError("messages is empty: give at least one message")
        msgs = self._with_system_message(msgs)
        context = RunContext(time.monotonic() + deadline if deadline else None)
        fragments = self._run(msgs, lang=lang or detect_lang(msgs), **kwargs)
        return fragments, as_dicts, context

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        """Yield fragments of the response (see the module docstring)."""
        raise NotImplementedError

    # ---- helpers for subclasses ------------------------------------------------------------------------

    def _call_llm(
        self,
        messages: list[Message],
        functions: list[dict] | None = None,
        *,
        start: int = 0,
        extra_generate_cfg: dict | None = None,
    ) -> Iterator[list[Message]]:
        """Stream the model's reply as fragments placed from `start`; return the complete reply."""
        ctx = current_run()
        ctx.check_deadline()
        cfg = {**self.extra_generate_cfg, **(extra_generate_cfg or {})}
        stream = self.llm.chat(
            messages, functions, stream=True, delta_stream=True, extra_generate_cfg=cfg, usage=ctx.usage
        )
        reply = Collector()
        add = reply.add
        deadline = ctx.deadline
        for fragments in stream:
            add(fragments)
            if start:
                for f in fragments:
                    f.extra[INDEX] += start
            yield fragments
            if deadline is not None:
                ctx.check_deadline()
        return reply.messages()

    def _with_system_message(self, msgs: list[Message]) -> list[Message]:
        if not self.system_message:
            return msgs
        first = msgs[0]
        if first.role != SYSTEM:
            return [Message._make(SYSTEM, self.system_message)] + msgs
        if isinstance(first.content, str):
            merged: str | list[ContentItem] = self.system_message + "\n\n" + first.content
        else:
            merged = [ContentItem(text=self.system_message + "\n\n")] + list(first.content)
        return [first.copy(content=merged)] + msgs[1:]

    # ---- output conversion ---------------------------------------------------------------------------

    def _named(self, fragments: list[Message]) -> list[Message]:
        name = self.name
        if name is not None:
            for f in fragments:
                if f.name is None:
                    f.name = name
        return fragments

    def _deltas(self, stream: Iterator[list[Message]], as_dicts: bool) -> Iterator[list]:
        named = self._named
        try:
            for fragments in stream:
                if not fragments:
                    continue
                fragments = named(fragments)
                yield [f.model_dump() for f in fragments] if as_dicts else fragments
        finally:
            _close(stream)

    def _cumulative(self, stream: Iterator[list[Message]], as_dicts: bool) -> Iterator[list]:
        response = Response()
        named = self._named
        dumped: list[dict] = []
        try:
            for fragments in stream:
                if not fragments:
                    continue
                changed = response.add(named(fragments))
                msgs = response.messages
                if not as_dicts:
                    yield list(msgs)
                    continue
                for i in changed:
                    if i == len(dumped):
                        dumped.append(msgs[i].model_dump())
                    else:
                        dumped[i] = msgs[i].model_dump()
                yield list(dumped)
        finally:
            _close(stream)


def _close(stream: Iterator) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()
