"""What a `_run` uses to ask for work: model calls, tool calls, blocking calls and sub-agent runs.

Each helper is a generator to use with `yield from`: it yields a request (see `chatagent.run.requests`) to the run's
driver and returns the result, so that one `_run` serves `run()` and `arun()`. When nobody passes the request
on (a Qwen-Agent-style `_run` iterating the helper with a plain `for` loop), the helper carries it out itself
(for model calls, `chatagent.run.compat`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast, overload

from chatagent.llm.prepare import marked_data
from chatagent.run import compat
from chatagent.run.context import RunContext, current_run
from chatagent.run.driver import ask, drain
from chatagent.run.nested import visible_to_model
from chatagent.run.requests import Asking, Blocking, ModelCall, ToolBatch, ToolWait, View
from chatagent.run.subagent import run_subagent
from chatagent.run.tool_call import run_tool
from chatagent.schema import Message, content_text

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel
    from chatagent.run.protocol import Runnable
    from chatagent.schema import ContentItem
    from chatagent.tools.calling import ToolCache

_Result = TypeVar("_Result")


class RunSteps:
    """The helpers `Agent` subclasses call from `_run` (mixed into `Agent`)."""

    name: str | None
    extra_generate_cfg: dict[str, Any]
    function_map: dict[str, Any]
    fragment_native: ClassVar[bool]
    #: which of `_call_llm`, `_call_tool`, `_detect_tool` a subclass overrides (see `chatagent.run.compat`)
    overridden_steps: ClassVar[frozenset[str]] = frozenset()

    _llm: BaseChatModel | None  # Agent's model, once `llm` has built it from the config

    if TYPE_CHECKING:  # Agent's properties

        @property
        def llm(self) -> BaseChatModel: ...

        @property
        def tool_cache(self) -> ToolCache | None: ...

    @property
    def model_built(self) -> bool:
        """Whether `llm` is built (`arun()` builds it in a worker thread first: a first build imports a backend)."""
        return self._llm is not None

    @overload
    def _call_llm(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None = None,
        stream: Literal[True] = True,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        start: int = 0,
        view: View | None = None,
        hide: bool = False,
    ) -> Generator[list[Message], list[Message] | None, list[Message]]: ...
    @overload
    def _call_llm(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None = None,
        *,
        stream: Literal[False],
        extra_generate_cfg: dict[str, Any] | None = None,
        start: int = 0,
        view: View | None = None,
        hide: bool = False,
    ) -> list[Message]: ...
    @overload
    def _call_llm(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        stream: Literal[False],
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        start: int = 0,
        view: View | None = None,
        hide: bool = False,
    ) -> list[Message]: ...
    def _call_llm(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None = None,
        stream: bool = True,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        start: int = 0,
        view: View | None = None,
        hide: bool = False,
    ) -> Generator[list[Message], list[Message] | None, list[Message]] | list[Message]:
        """Ask the model; use as `reply = yield from self._call_llm(...)`.

        The reply streams out as fragments placed from `start` (through `view`, see `ModelCall`; none with
        `hide=True`), and the complete reply (a list of Messages) is the return value. Tool results reach the
        model marked as untrusted data, each once per run (`chatagent.llm.prepare.marked_data`), and the run's
        provenance notes where the marked text came from (`chatagent.run.trust.Provenance`). Qwen-Agent's ways
        work too (`_qwen_call`).
        """
        ctx = current_run()
        ctx.check_deadline()
        cfg = {**self.extra_generate_cfg, **(ctx.generate_cfg or {}), **(extra_generate_cfg or {})}
        messages = cast("list[Message]", marked_data(messages, ctx.marked))  # a Qwen-style loop's dicts stay dicts
        ctx.provenance.read(messages)  # where what the model reads came from, for what the run writes
        if not stream or not self.fragment_native or "_call_llm" in self.overridden_steps:
            return self._qwen_call(messages, functions, stream, cfg, ctx, start, view, hide)
        # the request goes up to the driver, which sends the reply back
        return self._asked(ModelCall(self.llm, visible_to_model(messages), functions, cfg, start, ctx, view, hide))

    def _qwen_call(
        self, messages: list[Message], functions: list[dict[str, Any]] | None, stream: bool, cfg: dict[str, Any],
        ctx: RunContext, start: int, view: View | None, hide: bool,
    ) -> Generator[list[Message], list[Message] | None, list[Message]] | list[Message]:  # fmt: skip
        """`_call_llm` the Qwen-Agent ways: `stream=False` returns the whole reply; in an agent that is not
        `fragment_native`, `for rsp in self._call_llm(...)` yields the reply so far as whole lists (an empty one
        first); inside an override of `_call_llm` in a built-in loop, the call is placed as the loop's own."""
        if "_call_llm" in self.overridden_steps and stream and self.fragment_native and compat.placement():
            return compat.placed_call(self.llm, messages, functions, cfg, ctx)  # inside an override, in a built-in loop
        if not stream:
            return self.llm.chat(visible_to_model(messages), functions, stream=False, extra_generate_cfg=cfg,
                                 usage=ctx.usage, deadline=ctx.deadline)  # fmt: skip
        call = ModelCall(self.llm, visible_to_model(messages), functions, cfg, start, ctx, view, hide)
        if not self.fragment_native:
            return compat.model_call(call)
        return self._asked(call)

    @staticmethod
    def _asked(call: ModelCall) -> Asking[list[Message]]:
        return (yield call)

    def _run_tools(self, calls: list[Any], max_parallel: int = 8) -> Asking[Any]:
        """Run prepared tool calls (see `chatagent.tools.calling.prepare_call`), concurrently when there are
        several; use as `handle = yield from ...`, then `outcome = yield from self._tool_result(handle, i)`."""
        ctx = current_run()
        return (yield from ask(ToolBatch(calls, max_parallel, self.tool_cache, ctx.deadline, ctx)))

    @staticmethod
    def _tool_result(handle: Any, index: int) -> Asking[Any]:
        """The ToolOutcome of call `index` of a batch started with `_run_tools` (waits until it is done)."""
        return (yield from ask(ToolWait(handle, index, current_run())))

    def _run_tool(
        self, tool_name: str, tool_args: str | dict[str, Any] | None = "{}", **kwargs: Any
    ) -> Asking[str | list[ContentItem]]:
        """`_call_tool` for loops that serve `arun` too: `content = yield from self._run_tool(name, args)` (an
        overridden `_call_tool` is called in its place)."""
        if "_call_tool" in self.overridden_steps:
            return compat.tool_override(self._call_tool, tool_name, tool_args, kwargs)
        return run_tool(self, tool_name, tool_args, **kwargs)

    def _call_tool(
        self, tool_name: str, tool_args: str | dict[str, Any] | None = "{}", **kwargs: Any
    ) -> str | list[ContentItem]:
        """Run one tool the model asked for, here and now; returns the content for the function message
        (Qwen-Agent's helper; a loop that should also serve `arun` uses `yield from self._run_tool(...)`).

        Every failure the model can fix (unknown tool, bad arguments, the tool raising or timing out,
        `max_calls` used up) comes back as a short error text for the model; the traceback goes to the log.
        """
        return drain(run_tool(self, tool_name, tool_args, **kwargs))  # not an override's

    @staticmethod
    def _blocking(fn: Callable[..., _Result], *args: Any) -> Asking[_Result]:
        """`fn(*args)`, which may block (parsing files, a synchronous library): `x = yield from self._blocking(f, a)`.
        `run()` calls it in place, `arun()` in a worker thread."""
        return (yield from ask(Blocking(fn, *args)))

    def _subagent(
        self, agent: Runnable, messages: list[Message], lang: str, start: int = 0, view: Any = None, **kwargs: Any
    ) -> Asking[list[Message]]:
        """Run `agent` as part of this run: `turn = yield from self._subagent(agent, messages, lang, start)`
        (see `run_subagent`)."""
        return (yield from run_subagent(agent, messages, lang, start, view, **kwargs))

    def _detect_tool(self, message: Message) -> tuple[bool, str, str, str]:
        """(whether it calls a tool, the tool's name, its arguments, the text): Qwen-Agent's helper."""
        call = message.function_call
        text = content_text(message.content)
        if call is None:
            return False, "", "", text
        return True, call.name, call.arguments, text
