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
`_call_llm` with a plain `for` loop, works too: a subclass with its own `_run` is taken for one unless it sets
`fragment_native = True`, and its loop then goes through `chatagent.run.compat`.

`Agent` is what the run machinery (`chatagent.run`) knows as a `Runnable`: `run()` and `arun()` hand it to
`chatagent.run.start`, which starts `loop()` under the run's plugins and approval and drives it.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast, overload

from chatagent.llm.base import BaseChatModel
from chatagent.llm.registry import get_chat_model
from chatagent.llm.settings import check_generate_cfg
from chatagent.run import start
from chatagent.run.compaction import Compaction, compaction_of
from chatagent.run.compat import overridden_steps, whole_lists_as_fragments, wrap_call_llm, wrap_call_tool
from chatagent.run.context import RunContext, current_run
from chatagent.run.handle import ARun, Output, Run, afinal_response, final_response, named, output
from chatagent.run.plugin import Plugins
from chatagent.run.protocol import UNSET
from chatagent.run.requests import AgentLoop, Fragments, LoopItem
from chatagent.run.steps import RunSteps
from chatagent.run.subagent import hidden, map_fragments, run_subagent
from chatagent.run.tool_call import emit_tool_end, emit_tool_start
from chatagent.run.traces import recorders_for
from chatagent.schema import Message, with_system_text
from chatagent.schema.history import conversation_lang
from chatagent.utils.kwargs import reject_unknown

if TYPE_CHECKING:
    from chatagent.run.events import Callback
    from chatagent.schema.fragment import Fragment
    from chatagent.sessions.session import Session
    from chatagent.tools.calling import ToolCache
    from chatagent.tools.tool import BaseTool

_UNSET: Any = UNSET  # response_format not given: the agent's own

__all__ = [
    "ARun",
    "Agent",
    "Run",
    "RunContext",
    "current_run",
    "detect_lang",
    "emit_tool_end",
    "emit_tool_start",
    "hidden",
    "map_fragments",
    "run_subagent",
]


def detect_lang(messages: list[Message]) -> str:
    """The language of the latest user message: 'zh', 'ja', 'ko' or 'en' (see `chatagent.utils.lang`)."""
    return conversation_lang(messages)


def structured_output(response_format: Any, **options: Any) -> Any:
    """The plugin that checks answers against `response_format` (see `chatagent.plugins.structured`)."""
    from chatagent.plugins.structured import StructuredOutput  # loaded by agents with a response format only

    return StructuredOutput(response_format, **options)


class Agent(RunSteps):
    """Base of all agents. Subclasses implement `_run`.

    Args:
        llm: a model config dict, a BaseChatModel, or None for the default (see `default_llm_config`).
        system_message: put before the conversation (merged into the caller's system message if any).
        name, description: how other agents and the UI refer to this one.
        function_list: tools (used by the agents that call tools): registered names, `{'name': ..., <cfg>}`
            dicts, BaseTool instances or classes, typed functions (see `chatagent.tools.make_tools`).
        callbacks: functions or `chatagent.events.Callbacks` told about each run's model and tool calls.
        traces: record each run's trace: True (the session store), a store URL, a `chatagent.run.traces.TraceRecorder`.
        response_format: a pydantic model class (or JSON Schema dict): every run's final answer is validated
            against it (and retried), `run_nonstream` returns the validated instance (see `chatagent.plugins.structured`).
        plugins: objects that take part in every run and may change it: rewrite the input, check it, watch or
            block model and tool calls, rewrite or replace the answer (see `chatagent.plugins`, `chatagent.plugins.guardrails`).
        generate_cfg: generation settings for this agent's model calls, over the model's own.
        compaction: what a run does with a conversation that outgrew the model's window: "drop-oldest" (the
            default), "summarise" or "off", or a `Compaction` (a cheaper model, a budget; see
            `chatagent.run.compaction`).

    An unknown keyword argument raises TypeError naming it (in every subclass too: they pass theirs on here).
    """

    #: True when `_run` never blocks: all its waiting goes through `_call_llm`, `_run_tools`, `_blocking`
    #: and `_subagent`. `arun()` then steps it on the event loop itself; otherwise in a worker thread.
    #: A subclass that defines its own `_run` is assumed to block unless it sets this to True.
    async_safe: bool = True  # a class attribute (set per class), read as Runnable.async_safe
    #: True when `_run` yields fragments and requests only (see the module docstring). A subclass that defines its
    #: own `_run` is taken for a Qwen-Agent-style one, yielding the whole response so far, unless it sets this to
    #: True: its loop then goes through `chatagent.run.compat`, which takes either kind.
    fragment_native: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_run" in cls.__dict__:
            if "async_safe" not in cls.__dict__:
                cls.async_safe = False
            if "fragment_native" not in cls.__dict__:
                cls.fragment_native = False
        # Qwen-Agent-style overrides: the built-in loops call them, with the parameters they take (run.compat)
        cls.overridden_steps = overridden_steps(cls, Agent)
        for step_name, wrap in (("_call_llm", wrap_call_llm), ("_call_tool", wrap_call_tool)):
            own = cls.__dict__.get(step_name)
            if own is not None and not hasattr(own, "__wrapped__"):
                setattr(cls, step_name, wrap(own))
                if "async_safe" not in cls.__dict__:  # an override may block (Qwen-Agent's are synchronous)
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
        compaction: str | Compaction | None = None,
        traces: Any = False,
        **kwargs: Any,
    ) -> None:
        reject_unknown(type(self), kwargs)
        self.compaction: Compaction = compaction_of(compaction)
        self._llm_cfg = llm
        self._llm: BaseChatModel | None = llm if isinstance(llm, BaseChatModel) else None
        self.system_message = system_message
        self.name = name
        self.description = description
        self.extra_generate_cfg: dict[str, Any] = dict(generate_cfg or {})
        check_generate_cfg(self.extra_generate_cfg)  # bad values fail here, naming the key, not at the first call
        if isinstance(llm, dict):  # the model itself is built on first use
            check_generate_cfg(llm.get("generate_cfg") or {})
        self.function_list: list[Any] = list(function_list or [])
        self.callbacks: tuple[Callback, ...] = tuple(callbacks or ()) + recorders_for(traces)
        self.response_format = response_format
        self.plugins = plugins
        if self.function_list:
            from chatagent.tools.base import make_tools  # the tool machinery: loaded by agents with tools
            from chatagent.tools.calling import ToolCache  # (likewise)

            self.function_map: dict[str, BaseTool] = make_tools(self.function_list)
            self._tool_cache: ToolCache | None = ToolCache()
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

    @property
    def tool_cache(self) -> ToolCache | None:
        """Where the `cache=True` tools keep their results (None without tools)."""
        return self._tool_cache

    def run_plugins(self, extra: Iterable[Any] | None = None, response_format: Any = _UNSET) -> tuple[Any, ...]:
        """The plugins of one run: the agent's, then `extra`, then the check for `response_format` (the agent's
        when not given)."""
        plugins = self._plugins.plugins
        if extra:
            plugins = plugins + tuple(extra)
        if response_format is _UNSET:
            response_format = self.response_format
            if response_format is not None:
                if self._structured is None or self._structured.response_format is not response_format:
                    self._structured = structured_output(response_format)
                plugins = (*plugins, self._structured)
        elif response_format is not None:
            plugins = (*plugins, structured_output(response_format))
        return plugins

    def tools_need_approval(self) -> bool:
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
        stream, as_dicts, context = start.stream(self, messages, lang, deadline, session, kwargs, start.SYNC)
        return Run(stream, output(self.name, as_dicts, delta_stream, context), context)

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
        stream, as_dicts, context = start.stream(self, messages, lang, deadline, session, kwargs, start.ASYNC)
        return ARun(stream, output(self.name, as_dicts, delta_stream, context), context)

    def resume(
        self,
        *,
        session: Session,
        approval: bool | dict[str, bool] | None = None,
        reason: str = "",
        answers: dict[str, Any] | None = None,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> Run[Output]:
        """Continue `session`'s pending turn (`session.pending_turn`): one whose process died, whose run failed
        after doing work, that waits for approval (then give `approval`: True, False or {call id: bool}, and a
        `reason` for a denial), or whose tools asked a person something (then give `answers`: {question id:
        answer}, some or all of `pending_questions`; `chatagent.ask_user`). What it had completed is shown first and not done again (its tool calls are not
        run again); the model is asked from there; the turn is stored when it ends. Yields dicts, as `run()`
        does for dicts; SessionError when there is nothing to resume (see `chatagent.sessions.turn`)."""
        stream, context = start.resumed(self, session, approval, reason, answers, lang, deadline, kwargs, start.SYNC)
        return Run(stream, output(self.name, True, delta_stream), context)

    def aresume(
        self,
        *,
        session: Session,
        approval: bool | dict[str, bool] | None = None,
        reason: str = "",
        answers: dict[str, Any] | None = None,
        delta_stream: bool = False,
        lang: str | None = None,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> ARun[Output]:
        """`resume()` on the running event loop: `async for rsp in bot.aresume(session=s): ...`."""
        stream, context = start.resumed(self, session, approval, reason, answers, lang, deadline, kwargs, start.ASYNC)
        return ARun(stream, output(self.name, True, delta_stream), context)

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
        stream, as_dicts, context = start.stream(self, messages, lang, deadline, session, kwargs, start.SYNC)
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
        stream, as_dicts, context = start.stream(self, messages, lang, deadline, session, kwargs, start.ASYNC)
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
        options = {} if retries is _UNSET else {"retries": retries}
        check = structured_output(response_format, json_mode=json_mode, raise_invalid=True, **options)
        kwargs["plugins"] = [*(kwargs.get("plugins") or ()), check]
        kwargs["response_format"] = None
        return True

    def loop(self, messages: list[Message], lang: str, kwargs: dict[str, Any]) -> AgentLoop:
        """`_run` on the conversation with the system message merged, as fragments and requests (`Runnable.loop`)."""
        gen = self._run(self._with_system_message(messages), lang=lang, **kwargs)
        if self.fragment_native:  # its _run yields fragments and requests only
            return cast("AgentLoop", gen)
        return whole_lists_as_fragments(gen)

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
