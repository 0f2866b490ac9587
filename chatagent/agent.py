"""Agent: the run() / arun() template every agent shares.

`run()` copies and normalises the input, detects the language, merges the agent's system message,
calls the subclass's `_run()` and turns what it yields into what the caller asked for: dicts if the
caller gave dicts, Messages if it gave Messages; the whole response so far on each yield (cumulative,
the default) or only what is new (`delta_stream=True`). `arun()` is the same on an asyncio event loop.

A subclass's `_run(messages, lang, **kwargs)` is a generator that yields *fragments* (see
`chatagent.schema.stream`: lists of `Fragment`s, Messages that carry `index`, their position in this run's
response) and *requests* (see `chatagent.run.requests`) made by the helpers below and used with `yield from`,
so that one loop definition serves `run()` and `arun()`:

    reply = yield from self._call_llm(messages, functions, start=len(response))

A `_run` written the Qwen-Agent way, yielding the whole response so far each time and iterating
`_call_llm` with a plain `for` loop, works too (see `_call_llm`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast, overload

from chatagent.llm.base import BaseChatModel
from chatagent.llm.registry import get_chat_model
from chatagent.run import events
from chatagent.run.compat import whole_lists_as_fragments
from chatagent.run.context import CURRENT, RunContext, current_run
from chatagent.run.driver import adrive, drive, observed
from chatagent.run.handle import ARun, Output, Run, afinal_response, final_response, named, output
from chatagent.run.plugin import Plugins
from chatagent.run.requests import AgentLoop, Fragments, LoopItem
from chatagent.run.steps import LLM_CALL_CODE, RunSteps, emit_tool_end
from chatagent.run.subagent import hidden, map_fragments, run_subagent
from chatagent.schema import Message, not_a_message_list, to_messages, with_system_text
from chatagent.schema.history import conversation_lang
from chatagent.utils.kwargs import reject_unknown

if TYPE_CHECKING:
    from chatagent.run.events import Callback
    from chatagent.schema.fragment import Fragment
    from chatagent.sessions.session import Session
    from chatagent.tools.tool import BaseTool

_UNSET: Any = object()

__all__ = [
    "ARun",
    "Agent",
    "Run",
    "RunContext",
    "current_run",
    "detect_lang",
    "emit_tool_end",
    "hidden",
    "map_fragments",
    "run_subagent",
]


def detect_lang(messages: list[Message]) -> str:
    """The language of the latest user message: 'zh', 'ja', 'ko' or 'en' (see `chatagent.utils.lang`)."""
    return conversation_lang(messages)


class Agent(RunSteps):
    """Base of all agents. Subclasses implement `_run`.

    Args:
        llm: a model config dict, a BaseChatModel, or None for the default (see `default_llm_config`).
        system_message: put before the conversation (merged into the caller's system message if any).
        name, description: how other agents and the UI refer to this one.
        function_list: tools (used by the agents that call tools): registered names, `{'name': ..., <cfg>}`
            dicts, BaseTool instances or classes, typed functions (see `chatagent.tools.make_tools`).
        callbacks: functions or `chatagent.events.Callbacks` told about each run's model and tool calls.
        response_format: a pydantic model class (or JSON Schema dict): every run's final answer is validated
            against it (and retried), `run_nonstream` returns the validated instance (see `chatagent.plugins.structured`).
        plugins: objects that take part in every run and may change it: rewrite the input, check it, watch or
            block model and tool calls, rewrite or replace the answer (see `chatagent.plugins`, `chatagent.plugins.guardrails`).
        generate_cfg: generation settings for this agent's model calls, over the model's own.

    An unknown keyword argument raises TypeError naming it (in every subclass too: they pass theirs on here).
    """

    #: True when `_run` never blocks: all its waiting goes through `_call_llm`, `_run_tools`, `_blocking`
    #: and `_subagent`. `arun()` then steps it on the event loop itself; otherwise in a worker thread.
    #: A subclass that defines its own `_run` is assumed to block unless it sets this to True.
    async_safe: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_run" in cls.__dict__ and "async_safe" not in cls.__dict__:
            cls.async_safe = False

    def __init__(
        self,
        function_list: list[Any] | None = None,
        llm: dict[str, Any] | BaseChatModel | None = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        *,
        generate_cfg: dict[str, Any] | None = None,
        callbacks: Iterable[Callback] | None = None,
        response_format: Any = None,
        plugins: Iterable[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        reject_unknown(type(self), kwargs)
        self._llm_cfg = llm
        self._llm: BaseChatModel | None = llm if isinstance(llm, BaseChatModel) else None
        self.system_message = system_message
        self.name = name
        self.description = description
        self.extra_generate_cfg: dict[str, Any] = dict(generate_cfg or {})
        self.function_list: list[Any] = list(function_list or [])
        self.callbacks: tuple[Callback, ...] = tuple(callbacks or ())
        self.response_format = response_format
        self.plugins = plugins
        if self.function_list:
            from chatagent.tools.base import make_tools
            from chatagent.tools.calling import ToolCache

            self.function_map = make_tools(self.function_list)
            self._tool_cache = ToolCache()
        else:
            self.function_map = {}
            self._tool_cache = None
        self._init_lock = threading.Lock()
        self._structured: Any = None  # the StructuredOutput plugin for `response_format`, made on first use

    @property
    def plugins(self) -> list[Any]:
        """The plugins (a copy; assign a new list to change them)."""
        return list(self._plugins.plugins)

    @plugins.setter
    def plugins(self, value: Iterable[Any] | None) -> None:
        self._plugins = Plugins(value or ())

    def _run_plugins(self, extra: Iterable[Any] | None, response_format: Any = _UNSET) -> Plugins | None:
        """The plugins of one run: the agent's, then `extra`, then the check for `response_format` (the agent's
        when _UNSET); None when there are none."""
        plugins = self._plugins
        if extra:
            plugins = plugins + extra
        if response_format is _UNSET:
            response_format = self.response_format
            if response_format is not None:
                if self._structured is None or self._structured.response_format is not response_format:
                    from chatagent.plugins.structured import StructuredOutput

                    self._structured = StructuredOutput(response_format)
                plugins = plugins + [self._structured]
        elif response_format is not None:
            from chatagent.plugins.structured import StructuredOutput

            plugins = plugins + [StructuredOutput(response_format)]
        return plugins or None

    def _needs_approval(self) -> bool:
        """Whether a tool of this agent may pause a run for a person's approval."""
        return any(t.requires_approval is not False for t in self.function_map.values())

    @property
    def llm(self) -> BaseChatModel:
        """The model, built from the config on first use."""
        if self._llm is None:
            with self._init_lock:
                if self._llm is None:
                    self._llm = get_chat_model(self._llm_cfg)
        return self._llm

    @llm.setter
    def llm(self, value: dict[str, Any] | BaseChatModel | None) -> None:
        self._llm_cfg = value
        self._llm = value if isinstance(value, BaseChatModel) else None

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

    def as_tool(self, name: str | None = None, description: str | None = None) -> BaseTool:
        """This agent as a tool of another (also what an Agent in `function_list` becomes): the model gives it a task
        as text and gets this agent's answer; its run is nested in the caller's (see `chatagent.run.agent_tool`).
        `name` defaults to the agent's name, `description` to its description."""
        from chatagent.run.agent_tool import AgentTool  # the tools package loads on first use

        return AgentTool(self, name, description)

    def _sub_agents(self) -> list[Agent]:
        """The agents this one runs (a router's or a group chat's members)."""
        return []

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the template ----------------------------------------------------------------------------------

    @overload
    def run(
        self,
        messages: Iterable[Message],
        *,
        delta_stream: Literal[True],
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> Run[list[Fragment]]: ...
    @overload
    def run(
        self,
        messages: Iterable[Message],
        *,
        delta_stream: Literal[False] = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> Run[list[Message]]: ...
    @overload
    def run(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> Run[list[dict[str, Any]]]: ...
    @overload
    def run(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> Run[Output]: ...
    def run(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> Run[Output]:
        """Answer `messages`; iterate the result for the response as it grows.

        Each yield is a list: the whole response so far, or with `delta_stream=True` only the new
        fragments (`chatagent.Fragment`s, each with its `index`; fold them with `chatagent.merge_delta`). `deadline`
        is a time limit in seconds for the whole run. With `session` (a `chatagent.Session`) the run is on
        the stored conversation followed by `messages`, and the turn is stored when the run ends (see
        `chatagent.sessions.session`). The caller's messages are never modified.
        """
        stream, as_dicts, context = self._stream(messages, lang, deadline, session, kwargs)
        return Run(stream, output(self.name, as_dicts, delta_stream), context)

    @overload
    def arun(
        self,
        messages: Iterable[Message],
        *,
        delta_stream: Literal[True],
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> ARun[list[Fragment]]: ...
    @overload
    def arun(
        self,
        messages: Iterable[Message],
        *,
        delta_stream: Literal[False] = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> ARun[list[Message]]: ...
    @overload
    def arun(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> ARun[list[dict[str, Any]]]: ...
    @overload
    def arun(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> ARun[Output]: ...
    def arun(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        **kwargs: Any,
    ) -> ARun[Output]:
        """`run()` on the running asyncio event loop: `async for rsp in bot.arun(messages): ...`.

        Yields exactly what `run()` yields. The model streams over an async HTTP client, `async def` tools
        are awaited on this loop, other tools and blocking work (a session's store too) run in worker threads.
        """
        stream, as_dicts, context = self._astream(messages, lang, deadline, session, kwargs)
        return ARun(stream, output(self.name, as_dicts, delta_stream), context)

    def run_nonstream(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        response_format: Any = _UNSET,
        **kwargs: Any,
    ) -> Any:
        """The final response at once: equal to the last yield of `run()`.

        With `response_format` (a pydantic model class or a JSON Schema dict; here or on the agent) it
        returns the validated answer instead, or raises StructuredOutputError (`retries=`, `json_mode=`: see
        `chatagent.plugins.structured`). Pass `response_format=None` to get the response even when the agent has one.
        """
        structured = self._structured_run(response_format, kwargs)
        stream, as_dicts, context = self._stream(messages, lang, deadline, session, kwargs)
        return final_response(Run(stream, self._named, context), as_dicts, structured)

    async def arun_nonstream(
        self,
        messages: Iterable[dict[str, Any] | Message],
        *,
        lang: str | None = None,
        deadline: float | None = None,
        session: Session | None = None,
        response_format: Any = _UNSET,
        **kwargs: Any,
    ) -> Any:
        """`run_nonstream()` on the running event loop."""
        structured = self._structured_run(response_format, kwargs)
        stream, as_dicts, context = self._astream(messages, lang, deadline, session, kwargs)
        return await afinal_response(ARun(stream, self._named, context), as_dicts, structured)

    def _structured_run(self, response_format: Any, kwargs: dict[str, Any]) -> bool:
        """For `run_nonstream`: with a response format (given, or the agent's), put the check that raises on an
        answer that never validates into the run's plugins (kwargs); whether there is one."""
        retries, json_mode = kwargs.pop("retries", _UNSET), kwargs.pop("json_mode", None)
        if response_format is _UNSET:
            response_format = self.response_format
        if response_format is None:
            if retries is not _UNSET or json_mode is not None:
                raise TypeError("retries and json_mode apply to structured output: give response_format too")
            kwargs["response_format"] = None
            return False
        from chatagent.plugins.structured import DEFAULT_RETRIES, StructuredOutput

        check = StructuredOutput(
            response_format,
            retries=DEFAULT_RETRIES if retries is _UNSET else retries,
            json_mode=json_mode,
            raise_invalid=True,
        )
        kwargs["plugins"] = [*(kwargs.get("plugins") or ()), check]
        kwargs["response_format"] = None
        return True

    def _stream(
        self,
        messages: Iterable[dict[str, Any] | Message],
        lang: str | None,
        deadline: float | None,
        session: Any,
        kwargs: dict[str, Any],
    ) -> tuple[Iterator[Fragments], bool, RunContext]:
        """The run's fragments for `run()` (driven here), the output type, the context."""
        msgs, as_dicts, context = self._prepare(messages, deadline, kwargs)
        if session is None:
            return drive(self._start(msgs, lang, context, kwargs)), as_dicts, context
        from chatagent.sessions.session import checked_session, run_turn, tool_state_key

        session = checked_session(session)
        kwargs.setdefault("session_id", tool_state_key(session))

        def start(conversation: list[Message]) -> Iterator[Fragments]:
            return drive(self._start(conversation, lang, context, kwargs))

        return run_turn(session, msgs, start, self.name), as_dicts, context

    def _astream(
        self,
        messages: Iterable[dict[str, Any] | Message],
        lang: str | None,
        deadline: float | None,
        session: Any,
        kwargs: dict[str, Any],
    ) -> tuple[AsyncIterator[Fragments], bool, RunContext]:
        """`_stream` for `arun()`: driven on the event loop."""
        msgs, as_dicts, context = self._prepare(messages, deadline, kwargs)
        blocking = not self.async_safe
        if session is None:
            return adrive(self._start(msgs, lang, context, kwargs), blocking), as_dicts, context
        from chatagent.sessions.session import arun_turn, checked_session, tool_state_key

        session = checked_session(session)
        kwargs.setdefault("session_id", tool_state_key(session))

        def start(conversation: list[Message]) -> AsyncIterator[Fragments]:
            return adrive(self._start(conversation, lang, context, kwargs), blocking)

        return arun_turn(session, msgs, start, self.name), as_dicts, context

    def _prepare(
        self, messages: Iterable[dict[str, Any] | Message], deadline: float | None, kwargs: dict[str, Any]
    ) -> tuple[list[Message], bool, RunContext]:
        """The input normalised (a copy), the output type, the run's context."""
        if not_a_message_list(messages):
            raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
        given = list(messages)
        as_dicts = not given or not all(isinstance(m, Message) for m in given)
        msgs = to_messages(given)
        if not msgs:
            raise ValueError("messages is empty: give at least one message")
        own = self.callbacks + tuple(kwargs.pop("callbacks", None) or ())
        callbacks = own + events.global_callbacks if own else events.global_callbacks  # the latter: see handlers
        context = RunContext(time.monotonic() + deadline if deadline else None, callbacks, self.name)
        run_cfg = kwargs.pop("generate_cfg", None)
        if run_cfg:
            context.generate_cfg = dict(run_cfg)
        if self._plugins or "plugins" in kwargs or "response_format" in kwargs or self.response_format is not None:
            context.plugins = self._run_plugins(kwargs.pop("plugins", None), kwargs.pop("response_format", _UNSET))
        return msgs, as_dicts, context

    def _start(self, msgs: list[Message], lang: str | None, context: RunContext, kwargs: dict[str, Any]) -> AgentLoop:
        """Start `_run` on the conversation: its stream of fragments and requests."""
        context.session_id = kwargs.get("session_id")
        token = CURRENT.set(context)  # a Qwen-style _run may do work before its first yield
        try:
            gen = self._controlled(msgs, lang or detect_lang(msgs), kwargs, context)
        finally:
            CURRENT.reset(token)
        if context.callbacks:
            gen = observed(gen, context)
        return gen

    def _fragments(self, msgs: list[Message], lang: str, kwargs: dict[str, Any]) -> AgentLoop:
        """`_run` on the conversation with the system message merged, as fragments and requests."""
        gen = self._run(self._with_system_message(msgs), lang=lang, **kwargs)
        if getattr(gen, "gi_code", None) is LLM_CALL_CODE:
            # `return self._call_llm(...)`: the model call's generator, which yields fragments and requests only
            return cast("AgentLoop", gen)
        return whole_lists_as_fragments(gen)

    def _controlled(self, msgs: list[Message], lang: str, kwargs: dict[str, Any], ctx: RunContext) -> AgentLoop:
        """`_fragments`, under the run's plugins and tool approval when it has any (see `chatagent.run.control`)."""
        if ctx.plugins is None and not self._needs_approval():
            return self._fragments(msgs, lang, kwargs)
        from chatagent.run.control import controlled

        return controlled(self, ctx.plugins or Plugins(()), msgs, lang, kwargs, ctx)

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Generator[LoopItem | list[dict[str, Any]], Any, Any]:
        """Yield fragments of the response and requests (see the module docstring), or the whole response so far
        (Messages or dicts, Qwen-Agent style); each request's result is sent back in."""
        raise NotImplementedError

    def _with_system_message(self, msgs: list[Message]) -> list[Message]:
        """The conversation with the agent's system message before the caller's (see `with_system_text`)."""
        return with_system_text(msgs, self.system_message, first=True) if self.system_message else msgs

    # ---- output conversion ---------------------------------------------------------------------------

    def _named(self, fragments: Fragments) -> Fragments:
        """`fragments` with this agent's name on those that have none (in place: fragments are single-use)."""
        return named(fragments, self.name)
