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
from chatagent.stream import INDEX, Collector, DictResponse, Response, collect

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
    """Per-run state, readable while and after the run: token usage, the deadline, the callbacks,
    how often each tool was called, generate_cfg for this run only, the conversation's session_id."""

    __slots__ = ("usage", "deadline", "callbacks", "tool_calls", "generate_cfg", "session_id")

    def __init__(self, deadline: float | None = None, callbacks: tuple = ()) -> None:
        self.usage = Usage()
        self.deadline = deadline  # time.monotonic() value, or None
        self.callbacks = callbacks  # see chatagent.events; empty means no Event is ever built
        self.tool_calls: dict[str, int] = {}
        self.generate_cfg: dict | None = None
        self.session_id: str | None = None  # run(..., session_id=...): tools keep per-conversation state under it

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
        function_list: tools (used by the agents that call tools): registered names, `{'name': ..., <cfg>}`
            dicts, BaseTool instances or classes, typed functions (see `chatagent.tools.make_tools`).
        callbacks: functions or `chatagent.events.Callbacks` told about each run's model and tool calls.
        response_format: a pydantic model class (or JSON Schema dict): `run_nonstream` then returns a
            validated instance (see `chatagent.structured`).
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
        self.callbacks: tuple = tuple(kwargs.pop("callbacks", None) or ())
        self.response_format = kwargs.pop("response_format", None)
        if self.function_list:
            from chatagent.tools.base import make_tools
            from chatagent.tools.calling import ToolCache

            self.function_map = make_tools(self.function_list)
            self._tool_cache = ToolCache()
        else:
            self.function_map = {}
            self._tool_cache = None
        self._init_lock = threading.Lock()

    @property
    def llm(self) -> BaseChatModel:
        """The model, built from the config on first use."""
        if self._llm is None:
            with self._init_lock:
                if self._llm is None:
                    self._llm = get_chat_model(self._llm_cfg)
        return self._llm

    def close(self) -> None:
        """Close the tools: end the processes and connections they hold (code sandboxes, MCP servers).

        A tool used again afterwards starts them anew. Also called by `with agent: ...`.
        """
        for t in self.function_map.values():
            t.close()
        for a in self._sub_agents():
            a.close()

    def close_session(self, session_id: str) -> None:
        """End what the tools keep for one conversation (`run(..., session_id=...)`): its code sandbox and files."""
        for t in self.function_map.values():
            end = getattr(t, "close_session", None)
            if end is not None:
                end(session_id)
        for a in self._sub_agents():
            a.close_session(session_id)

    def _sub_agents(self) -> list[Agent]:
        """The agents this one runs (a router's or a group chat's members)."""
        return []

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        """The final response at once: equal to the last yield of `run()`.

        With `response_format` (a pydantic model class or a JSON Schema dict; here or on the agent) it
        returns the validated answer instead; see `chatagent.structured.run_structured`.
        """
        response_format = kwargs.pop("response_format", None) or self.response_format
        if response_format is not None:
            from chatagent.structured import run_structured

            return run_structured(self, messages, response_format, lang=lang, deadline=deadline, **kwargs)
        fragments, as_dicts, context = self._start(messages, lang, deadline, kwargs)
        response = collect(Run(self._deltas(fragments, False), context))
        return [m.model_dump() for m in response] if as_dicts else response

    def _start(
        self, messages: Iterable[dict | Message], lang: str | None, deadline: float | None, kwargs: dict
    ) -> tuple[Iterator[list[Message]], bool, RunContext]:
        """Normalise the input (a copy) and start `_run`: its fragment stream, the output type, the context."""
        if isinstance(messages, (dict, str, bytes, Message)) or not isinstance(messages, Iterable):
            raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        as_dicts = not messages or not all(isinstance(m, Message) for m in messages)
        msgs = to_messages(messages)
        if not msgs:
            raise ValueError("messages is empty: give at least one message")
        msgs = self._with_system_message(msgs)
        callbacks = self.callbacks + tuple(kwargs.pop("callbacks", None) or ())
        context = RunContext(time.monotonic() + deadline if deadline else None, callbacks)
        run_cfg = kwargs.pop("generate_cfg", None)
        if run_cfg:
            context.generate_cfg = dict(run_cfg)
        context.session_id = kwargs.get("session_id")
        fragments = self._run(msgs, lang=lang or detect_lang(msgs), **kwargs)
        if callbacks:
            fragments = self._observed(fragments, context)
        return fragments, as_dicts, context

    def _observed(self, fragments: Iterator[list[Message]], ctx: RunContext) -> Iterator[list[Message]]:
        """The run's fragments, with run_start and run_end events around them."""
        from chatagent.events import RUN_END, RUN_START, Event, emit

        emit(ctx.callbacks, Event(RUN_START, self.name))
        start = time.perf_counter()
        error = None
        try:
            yield from fragments
        except BaseException as e:
            error = "closed before the end" if isinstance(e, GeneratorExit) else f"{type(e).__name__}: {e}"
            raise
        finally:
            _close(fragments)
            end = Event(RUN_END, self.name, duration=time.perf_counter() - start, usage=ctx.usage, error=error)
            emit(ctx.callbacks, end)

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
        cfg = {**self.extra_generate_cfg, **(ctx.generate_cfg or {}), **(extra_generate_cfg or {})}
        if ctx.deadline is not None:  # the model layer caps its timeouts and retry waits by it
            cfg["deadline"] = ctx.deadline
        observed = bool(ctx.callbacks)
        usage = Usage() if observed else ctx.usage  # observed: this call's own usage, for its event
        if observed:
            from chatagent.events import LLM_END, LLM_START, Event, emit

            names = [f.get("name") if isinstance(f, dict) else getattr(f, "name", None) for f in functions or ()]
            emit(ctx.callbacks, Event(LLM_START, self.name, data={"messages": len(messages), "functions": names}))
            t0 = time.perf_counter()
        error = None
        reply = Collector()
        add = reply.add
        deadline = ctx.deadline
        try:
            stream = self.llm.chat(
                messages, functions, stream=True, delta_stream=True, extra_generate_cfg=cfg, usage=usage
            )
            for fragments in stream:
                add(fragments)
                if start:
                    for f in fragments:
                        f.extra[INDEX] += start
                yield fragments
                if deadline is not None:
                    ctx.check_deadline()
        except BaseException as e:
            error = "closed before the end" if isinstance(e, GeneratorExit) else f"{type(e).__name__}: {e}"
            raise
        finally:
            if observed:
                ctx.usage.add(usage.prompt_tokens, usage.completion_tokens)
                ctx.usage.calls += usage.calls
                emit(
                    ctx.callbacks,
                    Event(LLM_END, self.name, duration=time.perf_counter() - t0, usage=usage, error=error),
                )
        return reply.messages()

    def _call_tool(self, tool_name: str, tool_args: str | dict | None = "{}", **kwargs: Any) -> str | list:
        """Run one tool the model asked for; returns the content for the function message.

        Every failure the model can fix (unknown tool, bad arguments, the tool raising or timing out,
        `max_calls` used up) comes back as a short error text for the model; the traceback goes to the log.
        """
        from chatagent.tools.calling import PreparedCall, execute, prepare_call

        ctx = current_run()
        call_id = kwargs.pop("call_id", None)
        if ctx.callbacks:
            from chatagent.events import TOOL_START, Event, emit

            raw = tool_args if isinstance(tool_args, str) else str(tool_args)
            emit(ctx.callbacks, Event(TOOL_START, self.name, tool=tool_name, arguments=raw, call_id=call_id))
        call = prepare_call(
            self.function_map, tool_name, tool_args, call_id=call_id, counts=ctx.tool_calls,
            cache=self._tool_cache, kwargs=kwargs,
        )  # fmt: skip
        outcome = execute(call, self._tool_cache, ctx.deadline) if isinstance(call, PreparedCall) else call
        if ctx.callbacks:
            emit(ctx.callbacks, tool_end_event(self.name, outcome))
        ctx.check_deadline()
        return outcome.content

    def _detect_tool(self, message: Message) -> tuple[bool, str, str, str]:
        """(whether it calls a tool, the tool's name, its arguments, the text): Qwen-Agent's helper."""
        call = message.function_call
        text = content_text(message.content)
        if call is None:
            return False, "", "", text
        return True, call.name, call.arguments, text

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
        response = DictResponse() if as_dicts else Response()
        add, msgs, named = response.add, response.messages, self._named
        try:
            for fragments in stream:
                if fragments:
                    add(named(fragments))
                    yield list(msgs)
        finally:
            _close(stream)


def tool_end_event(agent: str | None, outcome: Any) -> Any:
    """The tool_end Event for a ToolOutcome (chatagent.tools.calling)."""
    from chatagent.events import TOOL_END, Event

    return Event(
        TOOL_END, agent, duration=outcome.duration, tool=outcome.name, arguments=outcome.arguments,
        call_id=outcome.call_id, result=outcome.content, error=outcome.content if outcome.error else None,
        data={"error_kind": outcome.error, "cached": outcome.cached},
    )  # fmt: skip


def _close(stream: Iterator) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()
