"""Running the tools a model asks for: parse, validate, limit, cache, time out, and report every failure
as a message the model can read.

A call goes through two steps. `prepare_call` runs in the run's own thread and decides everything that
needs no tool: unknown name, bad arguments, `max_calls`. `execute` runs the tool (possibly in a worker thread)
under its `timeout`, or takes its cached result: after the run's controls (approval, `before_tool`) have passed it. `run_batch` executes several calls concurrently
in a bounded set of daemon threads and returns their outcomes in call order.

A tool that runs past its timeout is abandoned: the model is told it timed out and the run goes on,
but Python cannot stop the thread, which keeps running in the background until the tool returns (it
is a daemon thread, so it never keeps the process alive).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

import orjson

from chatagent.tools.arguments import JSONObject, ToolArgumentError, parse_arguments, unknown_tool_message
from chatagent.tools.base import BaseTool, ToolServiceError, result_content
from chatagent.tools.file_access import conversation_files
from chatagent.utils.current_call import CALL_ID, PendingQuestion, run_as_call
from chatagent.utils.logs import quote

logger = logging.getLogger("chatagent.tools")

MAX_ERROR_CHARS = 300


class ToolErrorKind(str, Enum):
    """How a tool call went wrong: `ToolOutcome.error` (and the `error_kind` of its `tool_end` event).

    A `str`: it compares equal to its value (`outcome.error == 'timeout'` holds) and prints as it.

    - `unknown_tool`: the model called a tool the agent does not have
    - `bad_arguments`: the arguments are not JSON, or do not fit the tool's parameters
    - `max_calls`: the tool's `max_calls` in this turn were used up: not run again
    - `too_many_calls`: a call past the agent's `max_calls_per_reply` in one reply: not run
    - `loop`: the same call (name and arguments) was made before in this run: not run again
    - `timeout`: the tool did not finish within its `timeout`
    - `exception`: the tool (or an agent run as a tool) raised
    - `denied`: a person did not approve the call
    - `paused`: an agent run as a tool waits for a person's approval: the caller's run ends until then
    - `handoff`: a transfer not made: a second one in the same reply, or too many in this turn
    - `handed_over`: a transfer made: the receiver answered the rest of the turn
    - `interrupted`: the tool asked a person something (`chatagent.ask_user`): the run pauses for the answer
    """

    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"
    MAX_CALLS = "max_calls"
    TOO_MANY_CALLS = "too_many_calls"
    LOOP = "loop"
    TIMEOUT = "timeout"
    EXCEPTION = "exception"
    DENIED = "denied"
    PAUSED = "paused"
    HANDOFF = "handoff"
    HANDED_OVER = "handed_over"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


class ToolOutcome:
    """What became of one call: the content for the function message, and how it went.

    `error` is None on success, else a `ToolErrorKind`; `content` then holds the message the model reads
    (for `interrupted`, the question the tool asked a person: the run pauses for the answer).
    `fail(error, content)` sets both (`error`: a `ToolErrorKind` or its value; ValueError for another).
    """

    __slots__ = ("name", "arguments", "call_id", "content", "error", "duration", "cached", "return_direct")

    def __init__(self, name: str, arguments: str, call_id: str | None = None) -> None:
        self.name = name
        self.arguments = arguments
        self.call_id = call_id
        self.content: Any = ""
        self.error: ToolErrorKind | None = None
        self.duration = 0.0
        self.cached = False
        self.return_direct = False

    def fail(self, error: ToolErrorKind | str, content: Any) -> ToolOutcome:
        self.error, self.content = ToolErrorKind(error), content
        return self

    def __repr__(self) -> str:
        return f"ToolOutcome({self.name!r}, error={self.error!r}, content={str(self.content)[:60]!r})"


class PreparedCall:
    """A call that passed every check and still has to run (`outcome` is filled when it has). `ready` is set when
    its outcome was decided without running the tool (a plugin gave the result, or a person denied the call)."""

    __slots__ = ("tool", "args", "outcome", "cache_key", "kwargs", "ready")

    def __init__(
        self, tool: BaseTool, args: JSONObject, outcome: ToolOutcome, cache_key: str | None, kwargs: dict[str, Any]
    ) -> None:
        self.tool, self.args, self.outcome, self.cache_key, self.kwargs = tool, args, outcome, cache_key, kwargs
        self.ready = False


class ToolCache:
    """Results of `cache=True` tools by (conversation, name, canonical arguments); thread-safe, least recently used
    out. A result is read when its call runs, so after the call's approval: a cached result never skips the question
    to a person, and one conversation (one principal's, see `call_key`) never reads another's results; runs without a
    `session_id` share theirs.

    `claim` and `release` let concurrent calls with the same key run the tool once (see `execute`).
    """

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}

    def claim(self, key: str) -> tuple[Any, threading.Event | None]:
        """(the cached value, None) on a hit; else (_MISSING, None) when the caller is to compute the value
        (and must `release` the key), or (_MISSING, event) when another thread is computing it."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key], None
            running = self._running.get(key)
            if running is None:
                self._running[key] = threading.Event()
            return _MISSING, running

    def release(self, key: str) -> None:
        """The claimed computation of `key` is over (its value is cached, or it failed): wake the waiters."""
        with self._lock:
            running = self._running.pop(key, None)
        if running is not None:
            running.set()

    def get(self, key: str) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return _MISSING

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


_MISSING = object()


def call_key(name: str, args: JSONObject, scope: str | None = None) -> str | None:
    """A canonical key for (name, arguments) within `scope` (the conversation: a run's `session_id`, which a
    stored session makes from its store, user and id): sorted-key JSON; None if the arguments are not JSON data."""
    try:
        key = name + "\x00" + orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return None
    return key if scope is None else f"{scope}\x00{key}"


def prepare_call(
    tools: Mapping[str, BaseTool],
    name: str,
    arguments: str | JSONObject | None,
    *,
    call_id: str | None = None,
    counts: dict[str, int] | None = None,
    cache: ToolCache | None = None,
    kwargs: dict[str, Any] | None = None,
) -> PreparedCall | ToolOutcome:
    """Check a call without running it: a finished ToolOutcome (an error or a cached result) or a PreparedCall."""
    outcome = ToolOutcome(name, arguments if isinstance(arguments, str) else _as_text(arguments), call_id)
    tool = tools.get(name)
    if tool is None:
        logger.warning("the model called an unknown tool %s", quote(name))
        return outcome.fail(ToolErrorKind.UNKNOWN_TOOL, unknown_tool_message(name, tools))
    try:
        args = tool.validate(parse_arguments(arguments))
    except ToolArgumentError as e:
        logger.warning("bad arguments for %s: %s", name, e)
        return outcome.fail(ToolErrorKind.BAD_ARGUMENTS, _bad_arguments(name, str(e)))
    if tool.max_calls is not None and counts is not None and not _counted(name, tool.max_calls, counts):
        return outcome.fail(ToolErrorKind.MAX_CALLS, _max_calls_message(name, tool.max_calls))
    outcome.return_direct = bool(tool.return_direct)
    kwargs = kwargs or {}
    if tool.file_access and "files" not in kwargs:  # Qwen-Agent's file tools get the conversation's files
        kwargs = {**kwargs, "files": conversation_files(kwargs.get("messages"))}
    # a cached result is looked up when the call runs: after approval and the before_tool hooks
    key = call_key(name, args, kwargs.get("session_id")) if tool.cache and cache is not None else None
    return PreparedCall(tool, args, outcome, key, kwargs)


def _as_text(arguments: JSONObject | None) -> str:
    """Arguments given as data (not as the model's text), as the text a call's outcome keeps."""
    try:
        return orjson.dumps(arguments or {}).decode()
    except TypeError:
        return str(arguments)


def _counted(name: str, max_calls: int, counts: dict[str, int]) -> bool:
    """Count a call of tool `name` in the turn's `counts`; False (not counted) when its `max_calls` are used up."""
    used = counts.get(name, 0)
    if used >= max_calls:
        return False
    counts[name] = used + 1
    return True


def _max_calls_message(name: str, max_calls: int) -> str:
    return (
        f"Error: {name} may be called at most {max_calls} time(s) per conversation turn and was not run again. "
        "Continue with the results you already have."
    )


def _bad_arguments(name: str, problem: str) -> str:
    return f"Error: invalid arguments for {name}: {problem}. Call {name} again with corrected arguments."


def execute(call: PreparedCall, cache: ToolCache | None = None, deadline: float | None = None) -> ToolOutcome:
    """Run a prepared call under its timeout (and the run's deadline, a time.monotonic() value).

    Concurrent calls of a `cache=True` tool with the same arguments run it once: the others wait for
    that result (within their own time limit) and take it from the cache; if it failed, the next runs it.
    """
    if call.ready:
        return call.outcome
    limit, key = time_limit(call.tool, deadline), call.cache_key
    if cache is None or key is None:
        return _execute(call, None, limit)
    return _execute_cached(call, cache, key, limit)


def time_limit(tool: BaseTool, deadline: float | None) -> float | None:
    """The seconds a call of `tool` may run: its timeout, capped by what is left before the run's `deadline`."""
    if deadline is None:
        return tool.timeout
    left = max(deadline - time.monotonic(), 0.0)
    return left if tool.timeout is None else min(tool.timeout, left)


def _execute_cached(call: PreparedCall, cache: ToolCache, key: str, limit: float | None) -> ToolOutcome:
    """`execute` of a `cache=True` tool: the cached result, else the tool run once for every concurrent same call."""
    tool, outcome = call.tool, call.outcome
    start = time.perf_counter()
    end = None if limit is None else time.monotonic() + limit
    while True:
        hit, running = cache.claim(key)
        if hit is not _MISSING:
            outcome.content, outcome.cached = hit, True
            outcome.duration = time.perf_counter() - start
            return outcome
        if running is None:
            break  # this call runs the tool
        if not running.wait(None if end is None else max(end - time.monotonic(), 0.0)):
            return _timed_out(outcome, tool, limit or 0.0, start)  # only with a limit: wait(None) returns True
    try:
        return _execute(call, cache, None if end is None else max(end - time.monotonic(), 0.0))
    finally:
        cache.release(key)


def _execute(call: PreparedCall, cache: ToolCache | None, limit: float | None) -> ToolOutcome:
    tool, outcome = call.tool, call.outcome
    start = time.perf_counter()
    ok, value = _invoke(tool, call.args, call.kwargs, outcome.call_id) if limit is None else _in_thread(call, limit)
    outcome.duration = time.perf_counter() - start
    if not ok:
        return outcome.fail(*value)
    outcome.content = result_content(value)
    if call.cache_key is not None and cache is not None:
        cache.put(call.cache_key, outcome.content)
    return outcome


def _in_thread(call: PreparedCall, limit: float) -> tuple[bool, Any]:
    """`_invoke` in a thread of its own, waited for `limit` seconds: past them the call is abandoned (a timeout)."""
    box: list[tuple[bool, Any] | BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            box.append(_invoke(call.tool, call.args, call.kwargs, call.outcome.call_id))
        except BaseException as e:  # ToolServiceError: handed to the run's thread
            box.append(e)
        done.set()

    run_in_context = contextvars.copy_context().run  # the tool sees the run's context (its URL policy, ...)
    threading.Thread(target=run_in_context, args=(target,), name=f"tool-{call.tool.name}", daemon=True).start()
    if not done.wait(limit):
        return False, _timeout(call.tool, limit)
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


async def aexecute(call: PreparedCall, cache: ToolCache | None = None, deadline: float | None = None) -> ToolOutcome:
    """`execute` on the running event loop: an async tool is awaited here (cancelled at its timeout), any
    other runs in a worker thread."""
    import asyncio

    tool, outcome = call.tool, call.outcome
    if call.ready:
        return outcome
    if not tool.is_async:
        return await asyncio.to_thread(execute, call, cache, deadline)
    limit = time_limit(tool, deadline)
    start = time.perf_counter()
    end = None if limit is None else time.monotonic() + limit
    key = call.cache_key
    if cache is None or key is None:
        return await _aexecute(call, None, start, limit, end)
    while True:  # concurrent identical calls of a cached tool: one runs, the others take its result
        hit, running = cache.claim(key)
        if hit is not _MISSING:
            outcome.content, outcome.cached = hit, True
            outcome.duration = time.perf_counter() - start
            return outcome
        if running is None:
            break
        left = None if end is None else max(end - time.monotonic(), 0.0)
        if not await asyncio.to_thread(running.wait, left):
            return _timed_out(outcome, tool, limit or 0.0, start, cancelled=True)
    try:
        return await _aexecute(call, cache, start, limit, end)
    finally:
        cache.release(key)


async def _aexecute(
    call: PreparedCall, cache: ToolCache | None, start: float, limit: float | None, end: float | None
) -> ToolOutcome:
    import asyncio

    tool, outcome = call.tool, call.outcome
    left = None if end is None else max(end - time.monotonic(), 0.0)
    token = CALL_ID.set(outcome.call_id)  # the task wait_for makes copies the context with it
    try:
        value = await asyncio.wait_for(tool.arun_validated(call.args, **call.kwargs), left)
    except asyncio.TimeoutError:  # on Python 3.10 not the builtin TimeoutError (it is from 3.11)
        return _timed_out(outcome, tool, limit or 0.0, start, cancelled=True)
    except ToolServiceError:  # the tool says the run cannot go on
        raise
    except PendingQuestion as q:  # it asked a person: the call waits for the answer
        return outcome.fail(ToolErrorKind.INTERRUPTED, q.question)
    except (Exception, SystemExit) as e:
        outcome.duration = time.perf_counter() - start
        return outcome.fail(*_failure(tool, e))
    finally:
        CALL_ID.reset(token)
    outcome.duration = time.perf_counter() - start
    outcome.content = result_content(value)
    if cache is not None and call.cache_key is not None:
        cache.put(call.cache_key, outcome.content)
    return outcome


def _timed_out(
    outcome: ToolOutcome, tool: BaseTool, limit: float, start: float, cancelled: bool = False
) -> ToolOutcome:
    outcome.duration = time.perf_counter() - start
    return outcome.fail(*_timeout(tool, limit, cancelled))


def _timeout(tool: BaseTool, limit: float, cancelled: bool = False) -> tuple[ToolErrorKind, str]:
    """(TIMEOUT, the message for the model) of a call of `tool` not waited for past `limit` seconds (logged)."""
    if cancelled:
        logger.warning("tool %s did not finish within %.3gs: cancelled", tool.name, limit)
    else:
        logger.warning("tool %s did not finish within %.3gs: abandoned (its thread keeps running)", tool.name, limit)
    return (
        ToolErrorKind.TIMEOUT,
        f"Error: {tool.name} did not finish within {limit:.3g} seconds and was stopped waiting for. "
        "Try different arguments, another tool, or answer without it.",
    )


def _invoke(tool: BaseTool, args: JSONObject, kwargs: dict[str, Any], call_id: str | None) -> tuple[bool, Any]:
    """(True, result) or (False, (error kind, message for the model)); tracebacks go to the log only."""
    try:
        return True, run_as_call(call_id, tool.run_validated, args, **kwargs)  # the tool's current_run().call_id
    except ToolServiceError:  # the tool says the run cannot go on
        raise
    except PendingQuestion as q:  # it asked a person: the call waits for the answer (its content: the question)
        return False, (ToolErrorKind.INTERRUPTED, q.question)
    except (Exception, SystemExit) as e:  # SystemExit: a tool's sys.exit() or argparse must not end the run
        return False, _failure(tool, e)


def _failure(tool: BaseTool, e: BaseException) -> tuple[ToolErrorKind, str]:
    """(error kind, message for the model) for an exception raised by a tool; the traceback goes to the log."""
    if isinstance(e, ToolArgumentError):
        logger.warning("bad arguments for %s: %s", tool.name, e)
        return ToolErrorKind.BAD_ARGUMENTS, _bad_arguments(tool.name, str(e))
    logger.warning("tool %s raised %s", tool.name, type(e).__name__, exc_info=e)
    text = str(e).strip().replace("\n", " ")
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + "..."
    detail = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return ToolErrorKind.EXCEPTION, f"Error: {tool.name} failed: {detail}"


def run_batch(calls: list[Callable[[], ToolOutcome]], max_workers: int = 8) -> Callable[[int], ToolOutcome]:
    """Start `calls` concurrently on up to `max_workers` daemon threads; returns `wait(i)`, which blocks
    until call i is done and returns its outcome (so results can be taken in call order as they come)."""
    n = len(calls)
    results: list[ToolOutcome | BaseException | None] = [None] * n
    done = [threading.Event() for _ in range(n)]
    next_job = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(next_job, None)
            if i is None:
                return
            try:
                results[i] = calls[i]()
            except BaseException as e:  # our own bug: hand it to the waiting thread
                results[i] = e
            done[i].set()

    context = contextvars.copy_context()  # each worker runs in a copy of the caller's context
    for k in range(min(n, max(1, max_workers))):
        threading.Thread(target=context.copy().run, args=(worker,), name=f"tool-worker-{k}", daemon=True).start()

    def wait(i: int) -> ToolOutcome:
        done[i].wait()
        result = results[i]
        if isinstance(result, BaseException):
            raise result
        assert result is not None  # set before done[i]
        return result

    return wait


__all__ = [
    "ToolCache",
    "ToolErrorKind",
    "ToolOutcome",
    "PreparedCall",
    "aexecute",
    "call_key",
    "execute",
    "prepare_call",
    "run_batch",
]
