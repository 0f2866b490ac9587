"""What a `_run` uses to ask for work: model calls, tool calls, blocking calls and sub-agent runs.

Each helper is a generator to use with `yield from`: it yields a request (see `chatagent.run.requests`) to the run's
driver and returns the result, so that one `_run` serves `run()` and `arun()`. When nobody passes the request
on (a Qwen-Agent-style `_run` iterating the helper with a plain `for` loop), the helper carries it out itself.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from chatagent.run import events
from chatagent.run.compat import collected
from chatagent.run.context import RunContext, current_run
from chatagent.run.driver import ModelStream, carry_out, drive, model_stream
from chatagent.run.nested import visible_to_model
from chatagent.run.requests import Asking, Blocking, ModelCall, Request, ToolBatch, ToolWait, View
from chatagent.run.subagent import run_subagent
from chatagent.schema import Message, content_text
from chatagent.schema.stream import accumulate

if TYPE_CHECKING:
    from chatagent.agent import Agent
    from chatagent.llm.base import BaseChatModel
    from chatagent.schema import ContentItem

_Result = TypeVar("_Result")


class RunSteps:
    """The helpers `Agent` subclasses call from `_run` (mixed into `Agent`)."""

    name: str | None
    extra_generate_cfg: dict[str, Any]
    function_map: dict[str, Any]
    _tool_cache: Any

    if TYPE_CHECKING:  # Agent's property

        @property
        def llm(self) -> BaseChatModel: ...

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
        `hide=True`), and the complete reply (a list of Messages) is the return value.

        Qwen-Agent style works too: `for rsp in self._call_llm(...)` yields the reply so far as whole lists
        (an empty one first), and `stream=False` returns the whole reply at once.
        """
        ctx = current_run()
        ctx.check_deadline()
        cfg = {**self.extra_generate_cfg, **(ctx.generate_cfg or {}), **(extra_generate_cfg or {})}
        if not stream:
            return self.llm.chat(
                visible_to_model(messages),
                functions,
                stream=False,
                extra_generate_cfg=cfg,
                usage=ctx.usage,
                deadline=ctx.deadline,
            )
        call = ModelCall(self.llm, visible_to_model(messages), functions, cfg, start, ctx, view, hide)
        return self._llm_call(call)

    def _llm_call(self, call: ModelCall) -> Generator[list[Message], list[Message] | None, list[Message]]:
        reply = yield call
        if reply is not None:
            return reply
        if call.done:  # a plain for loop passed the request on itself and the driver carried it out
            return call.result
        # a plain for loop iterates us (Qwen-Agent style): call the model here, yield the reply as whole lists
        call.hide = True
        s = ModelStream(call)
        stream = model_stream(call, s.usage)
        try:
            yield from accumulate(collected(stream, s))
        except BaseException as e:
            s.failed(e)
            raise
        finally:
            stream.close()
            reply = s.finish()
        return reply

    def _run_tools(self, calls: list[Any], max_parallel: int = 8) -> Asking[Any]:
        """Run prepared tool calls (see `chatagent.tools.calling.prepare_call`), concurrently when there are
        several; use as `handle = yield from ...`, then `outcome = yield from self._tool_result(handle, i)`."""
        ctx = current_run()
        return (yield from ask(ToolBatch(calls, max_parallel, self._tool_cache, ctx.deadline)))

    @staticmethod
    def _tool_result(handle: Any, index: int) -> Asking[Any]:
        """The ToolOutcome of call `index` of a batch started with `_run_tools` (waits until it is done)."""
        return (yield from ask(ToolWait(handle, index)))

    def _run_tool(
        self, tool_name: str, tool_args: str | dict[str, Any] | None = "{}", **kwargs: Any
    ) -> Asking[str | list[ContentItem]]:
        """`_call_tool` for loops that serve `arun` too: `content = yield from self._run_tool(name, args)`."""
        from chatagent.tools.calling import PreparedCall, prepare_call

        ctx = current_run()
        call_id = kwargs.pop("call_id", None)
        self._tool_start(ctx, tool_name, tool_args, call_id)
        call = prepare_call(
            self.function_map, tool_name, tool_args, call_id=call_id, counts=ctx.tool_calls,
            cache=self._tool_cache, kwargs=kwargs,
        )  # fmt: skip
        if isinstance(call, PreparedCall):
            handle = yield from ask(ToolBatch([call], 1, self._tool_cache, ctx.deadline))
            outcome = yield from ask(ToolWait(handle, 0))
        else:
            outcome = call
        if ctx.callbacks:
            emit_tool_end(self.name, outcome, ctx)
        ctx.check_deadline()
        return outcome.content

    def _call_tool(
        self, tool_name: str, tool_args: str | dict[str, Any] | None = "{}", **kwargs: Any
    ) -> str | list[ContentItem]:
        """Run one tool the model asked for, here and now; returns the content for the function message
        (Qwen-Agent's helper; a loop that should also serve `arun` uses `yield from self._run_tool(...)`).

        Every failure the model can fix (unknown tool, bad arguments, the tool raising or timing out,
        `max_calls` used up) comes back as a short error text for the model; the traceback goes to the log.
        """
        return drain(self._run_tool(tool_name, tool_args, **kwargs))

    def _tool_start(self, ctx: RunContext, name: str, arguments: Any, call_id: str | None) -> None:
        found = events.handlers(ctx.callbacks, events.TOOL_START) if ctx.callbacks else None
        if found:
            raw = arguments if isinstance(arguments, str) else str(arguments)
            event = events.Event(events.TOOL_START, self.name, tool=name, arguments=raw, call_id=call_id, run=ctx)
            events.deliver(found, event)

    @staticmethod
    def _blocking(fn: Callable[..., _Result], *args: Any) -> Asking[_Result]:
        """`fn(*args)`, which may block (parsing files, a synchronous library): `x = yield from self._blocking(f, a)`.
        `run()` calls it in place, `arun()` in a worker thread."""
        return (yield from ask(Blocking(fn, *args)))

    def _subagent(
        self, agent: Agent, messages: list[Message], lang: str, start: int = 0, view: Any = None, **kwargs: Any
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


def ask(request: Request) -> Asking[Any]:
    """Yield `request` to the driver; its result. Carried out here if nobody did (a plain for loop iterating
    the helper without passing the request on)."""
    yield request
    return request.result if request.done else carry_out(request)


def drain(gen: Asking[_Result]) -> _Result:
    """Run a helper generator whose only yields are requests, carrying them out here; its return value."""
    box: list[_Result] = []

    def returning() -> Generator[Any, Any, None]:
        box.append((yield from gen))

    for _ in drive(returning()):
        pass
    return box[0]


def emit_tool_end(agent: str | None, outcome: Any, run: RunContext) -> None:
    """Tell `run`'s callbacks that handle tool_end about a ToolOutcome (chatagent.tools.calling) of a call made in
    it; the Event is built only if one does."""
    found = events.handlers(run.callbacks, events.TOOL_END)
    if found:
        event = events.Event(
            events.TOOL_END, agent, duration=outcome.duration, tool=outcome.name, arguments=outcome.arguments,
            call_id=outcome.call_id, result=outcome.content, error=outcome.content if outcome.error else None,
            data={"error_kind": outcome.error, "cached": outcome.cached}, run=run,
        )  # fmt: skip
        events.deliver(found, event)


LLM_CALL_CODE = RunSteps._llm_call.__code__
