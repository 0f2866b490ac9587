"""Driving an agent's loop: its requests (`chatagent.run.requests`) carried out synchronously or on an event loop.

`drive(gen)` iterates an agent's fragment-and-request stream in the calling thread and yields only
fragments; `adrive(gen, in_thread)` is the same on an asyncio event loop: the model streams over an async
HTTP client, async tools are awaited on the caller's loop, sync tools and blocking work run in worker
threads. Both share `ModelStream` (what happens to each piece of a model reply) so that the two paths
cannot drift, and both hand a failed request back into the agent's loop (`gen.throw`), where it can be
handled like an exception raised in place.
"""

from __future__ import annotations

# asyncio's default executor (the first `to_thread`'s) imports this at its first use, on the event loop
import concurrent.futures.thread  # noqa: F401  # pyright: ignore[reportUnusedImport]
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from chatagent.llm.base import Usage
from chatagent.run.context import CURRENT
from chatagent.run.event_stream import awaiting, waited
from chatagent.run.events import LLM_END, LLM_START, RUN_END, RUN_START, deliver, handlers, make_event
from chatagent.run.handle import close_stream
from chatagent.run.requests import (
    AgentLoop,
    Asking,
    Blocking,
    Fragments,
    LoopItem,
    ModelCall,
    Request,
    ToolBatch,
    ToolControl,
    ToolWait,
    step,
)
from chatagent.schema.fragment import typed
from chatagent.schema.stream import Collector

if TYPE_CHECKING:
    import asyncio

    from chatagent.llm.base import Usage
    from chatagent.run.context import RunContext
    from chatagent.schema import Message


class _Done:
    """What `_step` returns when the agent's loop has ended (`_DONE`)."""

    __slots__ = ()


_DONE = _Done()
_Result = TypeVar("_Result")


class ModelStream:
    """One model call as the driver runs it: usage and events, and each piece of the reply placed, viewed and
    collected. `push(fragments)` returns what to show (or None); `finish()` the complete reply."""

    __slots__ = ("call", "usage", "reply", "start", "view", "maps", "deadline", "t0", "error", "_observed")

    def __init__(self, call: ModelCall) -> None:
        self.call = call
        ctx = call.context
        self._observed = bool(ctx.callbacks)
        self.usage = Usage() if self._observed else ctx.usage  # observed: this call's own usage, for its event
        self.reply = Collector()
        self.start, self.view, self.maps = call.start, call.view, call.maps
        self.deadline = ctx.deadline
        self.error: str | None = None
        self.t0 = 0.0
        if self._observed:
            self._started()

    def _started(self) -> None:
        """The call's start told to the run's callbacks (LLM_START), its clock started."""
        call = self.call
        ctx = call.context
        found = handlers(ctx.callbacks, LLM_START)
        if found:
            data = {"messages": len(call.messages), "functions": [f.get("name") for f in call.functions or ()]}
            deliver(found, make_event(LLM_START, _agent_name(ctx), ctx, data=data))
        self.t0 = time.perf_counter()

    def push(self, fragments: Fragments) -> Fragments | None:
        self.reply.add(fragments)
        if self.deadline is not None:
            self.call.context.check_deadline()
        call = self.call
        if call.hide:
            return None
        start = self.start
        if start:
            for f in fragments:
                f.index += start
        view = self.view
        if view is not None:
            fragments = view(fragments)
            if view.done:
                call.stop = True
        for m in self.maps:
            if not fragments:
                break
            fragments = m(fragments)
        return fragments or None

    def failed(self, e: BaseException) -> None:
        self.error = "closed before the end" if isinstance(e, GeneratorExit) else f"{type(e).__name__}: {e}"

    def finish(self) -> list[Message]:
        """Account for the call (events, usage) and return the complete reply, also kept in the request."""
        call = self.call
        reply = self.reply.messages()
        if self._observed:
            self._ended(reply)
        call.done, call.result = True, reply
        return reply

    def _ended(self, reply: list[Message]) -> None:
        """The call's usage added to the run's, its end told to the run's callbacks (LLM_END)."""
        call = self.call
        ctx = call.context
        ctx.usage.merge(self.usage)
        found = handlers(ctx.callbacks, LLM_END)
        if found:
            data = {"model": call.llm.model, "model_type": call.llm.model_type, "input": call.messages,
                    "output": reply, "functions": call.functions, "cfg": call.cfg}  # fmt: skip
            duration = time.perf_counter() - self.t0
            deliver(found, make_event(LLM_END, _agent_name(ctx), ctx, duration, self.usage, self.error, data))


def _agent_name(ctx: Any) -> str | None:
    return getattr(ctx, "agent_name", None)


def chat_args(call: ModelCall, usage: Any) -> dict[str, Any]:
    """The keyword arguments of `call`'s chat(): the run's deadline caps the model's timeouts and retry waits."""
    args: dict[str, Any] = {"stream": True, "delta_stream": True, "extra_generate_cfg": call.cfg, "usage": usage}
    deadline = getattr(call.context, "deadline", None)
    if deadline is not None:
        args["deadline"] = deadline
    return args


def model_stream(call: ModelCall, usage: Usage) -> Generator[Fragments, None, None]:
    """`call`'s model asked for its reply as a stream of fragments (`chat_args`)."""
    # chat() types both of its forms; with stream=True (chat_args) it returns its generator of fragment lists
    return cast(
        "Generator[Fragments, None, None]", call.llm.chat(call.messages, call.functions, **chat_args(call, usage))
    )


# ---- synchronous ----------------------------------------------------------------------------------------


def drive(gen: AgentLoop, gives_events: bool = True) -> Generator[Fragments, None, None]:
    """Run an agent's loop in this thread: yield its fragments, carry out its requests (`gives_events`: False for a
    loop run inside a step of the run's, whose waits cannot give the run's events out: `drain`)."""
    value: Any = None
    error: BaseException | None = None
    send, events = gen.send, getattr(CURRENT.get(), "events", None) if gives_events else None  # (the Listener)
    try:
        while True:
            try:
                item = gen.throw(error) if error is not None else send(value)
            except StopIteration:
                return
            error = None
            if type(item) is list:
                value = None
                if item:
                    yield typed(item)
                continue
            try:
                if type(item) is not ModelCall:
                    value = carry_out(item) if events is None else (yield from waited(events, item, carry_out))
                    continue
                s = ModelStream(item)  # the model call, written out here (as in adrive): one layer less per chunk
                push, stream = s.push, model_stream(item, s.usage)
                try:
                    if events is not None and events.pending:  # model_start goes out as the request leaves
                        yield []
                    for fragments in stream:
                        out = push(fragments)
                        if out:
                            yield out
                        if item.stop:
                            break
                except BaseException as e:
                    s.failed(e)
                    raise
                finally:
                    stream.close()
                    value = s.finish()
            except Exception as e:
                error, value = e, None
    finally:
        gen.close()


def carry_out(request: Any) -> Any:
    """Carry out a request other than a model call here and now; its result (also kept in the request)."""
    kind: type[object] = request.__class__
    if kind is ToolWait:
        value = request.handle(request.index)
        for control in unseen_controls(request):
            control.after_tool(value)
    elif kind is ToolBatch:
        for control in unseen_controls(request):
            control.gate(request)
        value = _start_tools(request)
    elif kind is Blocking:
        value = request.fn(*request.args)
    else:
        raise TypeError(f"an agent's _run yielded {kind.__name__}, not a list of messages")
    request.done, request.result = True, value
    return value


def unseen_controls(request: ToolBatch | ToolWait) -> list[ToolControl]:
    """The controls of `request`'s run it did not pass through, innermost first, now marked as seen: a driver hands it
    to them (`gate` a batch, `after_tool` an outcome), so that they hold wherever a tool runs (`ToolControl`)."""
    ctx = request.context
    return [] if ctx is None or not ctx.controls else _unseen(request, ctx.controls)


def _unseen(request: ToolBatch | ToolWait, controls: tuple[ToolControl, ...]) -> list[ToolControl]:
    unseen = [c for c in reversed(controls) if c not in request.seen]
    request.seen += unseen
    return unseen


def _start_tools(batch: ToolBatch) -> Callable[[int], Any]:
    from chatagent.tools.calling import execute, run_batch  # the tool machinery: by runs with tools

    calls, cache, deadline = batch.calls, batch.cache, batch.deadline
    if len(calls) == 1:  # one call runs in this thread, when it is waited for
        return lambda i: execute(calls[i], cache, deadline)
    jobs = [lambda p=p: execute(p, cache, deadline) for p in calls]
    return run_batch(jobs, batch.max_parallel)


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

    for _ in drive(returning(), False):
        pass
    return box[0]


# ---- asynchronous ---------------------------------------------------------------------------------------


def _step(gen: AgentLoop, value: Any, error: BaseException | None) -> LoopItem | _Done:
    """One step of the agent's loop: its next item, or _DONE (StopIteration cannot cross a thread's future)."""
    try:
        return step(gen, value, error)
    except StopIteration:
        return _DONE


async def adrive(
    gen: AgentLoop, in_thread: bool, before: Callable[[], object] | None = None
) -> AsyncIterator[Fragments]:
    """Run an agent's loop on the running event loop: yield its fragments, carry out its requests.

    `in_thread`: step the loop's own code in a worker thread (for agents whose `_run` may block). `before`: work
    done in a worker thread before the first step (building the agent's model: its first build imports a backend).
    """
    import asyncio  # here, not at the top: `import chatagent` stays fast for code that never goes async

    if before is not None:
        await asyncio.to_thread(before)
    value: Any = None
    events = getattr(CURRENT.get(), "events", None)  # run(..., events=True): the stream's Listener
    error: BaseException | None = None
    tasks: list[asyncio.Future[Any]] = []
    stepping: asyncio.Future[LoopItem | _Done] | None = None  # the step running in a worker thread (`in_thread`)
    try:
        while True:
            if in_thread:
                stepping = asyncio.ensure_future(asyncio.to_thread(_step, gen, value, error))
                if events is not None:  # what the step's own code makes happen goes out as it happens
                    async for _ in awaiting(events, stepping):
                        yield []
                item = await stepping
            else:
                item = _step(gen, value, error)
            if item is _DONE:
                return
            error = None
            if type(item) is list:
                value = None
                if item:
                    yield typed(item)
                continue
            try:
                if type(item) is ModelCall:  # `_model` for asyncio, written out here: one layer less per chunk
                    s = ModelStream(item)
                    push = s.push
                    stream = item.llm.achat(item.messages, item.functions, **chat_args(item, s.usage))
                    try:
                        if events is not None and events.pending:  # model_start goes out as the request leaves
                            yield []
                        async for fragments in stream:
                            out = push(fragments)
                            if out:
                                yield out
                            if item.stop:
                                break
                    except BaseException as e:
                        s.failed(e)
                        raise
                    finally:
                        await stream.aclose()  # at once, also when we are closed or cancelled
                        value = s.finish()
                elif type(item) is ToolWait:
                    if events is not None:  # what happens while the tool runs goes out as it happens
                        async for _ in awaiting(events, item.handle[item.index]):
                            yield []
                    value = await item.handle[item.index]
                    for control in unseen_controls(item):
                        control.after_tool(value)
                elif type(item) is ToolBatch:
                    for control in unseen_controls(item):
                        control.gate(item)
                    value = _astart_tools(item)
                    tasks.extend(value)
                elif type(item) is Blocking:
                    work = asyncio.ensure_future(asyncio.to_thread(item.fn, *item.args))
                    if events is not None:
                        async for _ in awaiting(events, work):
                            yield []
                    value = await work
                else:
                    raise TypeError(f"an agent's _run yielded {type(item).__name__}, not a list of messages")
                item.done, item.result = True, value
            except Exception as e:
                error, value = e, None
    finally:
        for t in tasks:
            t.cancel()
        if in_thread:
            if stepping is not None and not stepping.done():  # closed while a step runs: it ends first
                await asyncio.wait([stepping])
            await asyncio.to_thread(gen.close)
        else:
            gen.close()


def _astart_tools(batch: ToolBatch) -> list[asyncio.Future[Any]]:
    import asyncio

    from chatagent.tools.calling import aexecute  # the tool machinery: by runs with tools

    limit = asyncio.Semaphore(max(1, batch.max_parallel))
    cache, deadline = batch.cache, batch.deadline

    async def one(call: Any) -> Any:
        async with limit:
            return await aexecute(call, cache, deadline)

    return [asyncio.ensure_future(one(c)) for c in batch.calls]


# ---- the run's own events --------------------------------------------------------------------------------


def observed(gen: AgentLoop, ctx: RunContext) -> AgentLoop:
    """The run's stream, with run_start and run_end events around it."""
    found = handlers(ctx.callbacks, RUN_START)
    if found:
        deliver(found, make_event(RUN_START, ctx.agent_name, ctx))
    start = time.perf_counter()
    error = None
    try:
        return (yield from gen)
    except BaseException as e:
        error = "closed before the end" if isinstance(e, GeneratorExit) else f"{type(e).__name__}: {e}"
        raise
    finally:
        close_stream(gen)
        duration = time.perf_counter() - start
        found = handlers(ctx.callbacks, RUN_END)
        if found:
            deliver(found, make_event(RUN_END, ctx.agent_name, ctx, duration, ctx.usage, error))


__all__ = [
    "ModelStream",
    "adrive",
    "ask",
    "carry_out",
    "drain",
    "drive",
    "observed",
    "unseen_controls",
]
