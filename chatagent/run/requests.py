"""What an agent's loop asks of the run that drives it.

An agent's `_run` is a generator. Besides fragments (what to show, see `chatagent.schema.stream`) it yields
*requests*: call the model, run tools, run a blocking function. The driver (`chatagent.run.driver`:
`Agent.run()` drives synchronously, `Agent.arun()` on an event loop) carries each request out and
sends its result back into the generator, so one loop definition serves both. Agents do not build
requests by hand: `Agent._call_llm`, `Agent._run_tools` and `Agent._blocking` do, used with `yield from`:

    reply = yield from self._call_llm(messages, functions, start=len(response))
    outcomes = yield from self._run_tools(prepared_calls)

Each request is carried out once, by the innermost driver that sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel
    from chatagent.schema import Message
    from chatagent.schema.fragment import Fragment

#: Fragments as the framework passes them on (`chatagent.schema.stream`).
Fragments = list["Fragment"]


class View:
    """What to show of a model reply as it streams (subclass and override `__call__`).

    Called with each piece of the reply (fragments already placed in the response); returns the fragments
    to show instead (or none). Setting `done = True` ends the model's stream after this piece.
    """

    done = False

    def __call__(self, fragments: Fragments) -> Fragments:
        return fragments


class Request:
    """Base of the requests. A driver that carries one out sets `done` and `result` (also on the request itself,
    so that the result reaches code that passed the request on through a plain `for` loop)."""

    __slots__ = ()
    done: bool
    result: Any


class ModelCall(Request):
    """Call `llm` on `messages`. The driver streams the reply's fragments out (placed from `start`, passed
    through `view` and then each of `maps`) and sends the complete reply back.

    - `view`: what to show of each piece of the reply (a `View`, e.g. a ReAct parser), which may end the
      stream early. `hide=True` shows nothing (the reply is still sent back).
    - `maps`: outer transformations added by whoever forwards the request (a sub-agent's placement in its
      parent's response, name fills), applied after `view`.
    """

    __slots__ = (
        "llm",
        "messages",
        "functions",
        "cfg",
        "start",
        "view",
        "hide",
        "maps",
        "stop",
        "context",
        "done",
        "result",
    )

    def __init__(self, llm: BaseChatModel, messages: list[Message], functions: list[dict[str, Any]] | None,
                 cfg: dict[str, Any], start: int, context: Any, view: View | None = None, hide: bool = False
                 ) -> None:  # fmt: skip
        self.llm, self.messages, self.functions, self.cfg = llm, messages, functions, cfg
        self.start, self.context, self.view, self.hide = start, context, view, hide
        self.maps: list[Callable[[Fragments], Fragments]] = []
        self.stop = False
        self.done = False
        self.result: Any = None

    def __repr__(self) -> str:
        return f"ModelCall({self.llm!r}, {len(self.messages)} messages, start={self.start})"


class ToolBatch(Request):
    """Run prepared tool calls (`chatagent.tools.calling.PreparedCall`), up to `max_parallel` at once.

    The driver starts them and sends back a handle; `ToolWait(handle, i)` then waits for call i and sends
    back its ToolOutcome, so results can be shown in call order as they come. `context` is the run that asks
    (its `controls` decide approval and run the tool hooks, see `ToolControl`); `seen` the controls that already
    have.
    """

    __slots__ = ("calls", "max_parallel", "cache", "deadline", "context", "seen", "done", "result")

    def __init__(
        self, calls: list[Any], max_parallel: int, cache: Any, deadline: float | None, context: Any = None
    ) -> None:
        self.calls = calls
        self.max_parallel = max_parallel
        self.cache = cache
        self.deadline = deadline
        self.context = context
        self.seen: list[ToolControl] = []
        self.done, self.result = False, None


class ToolWait(Request):
    """Wait for call `index` of a started ToolBatch (`handle` is what the driver sent back for it); `context` and
    `seen` as for the batch."""

    __slots__ = ("handle", "index", "context", "seen", "done", "result")

    def __init__(self, handle: Any, index: int, context: Any = None) -> None:
        self.handle = handle
        self.index = index
        self.context = context
        self.seen: list[ToolControl] = []
        self.done, self.result = False, None


class ToolControl(Protocol):
    """What controls a run's tool calls (`chatagent.run.control`): approval, `before_tool` and `after_tool`, and the
    hold of its input checks. A control sees the requests that pass through it; a driver hands it those that did
    not (a loop that carries its tools out itself: `_call_tool`, a Qwen-style loop), so the controls hold wherever a
    tool runs."""

    def gate(self, batch: ToolBatch) -> None:
        """Before `batch` starts: wait for the input checks, decide approval, run `before_tool` (may raise)."""
        ...

    def after_tool(self, outcome: Any) -> None:
        """After a call ran: the `after_tool` hooks (may change `outcome.content`)."""
        ...


class Blocking(Request):
    """Call `fn(*args)`, which may block for a while (reading files, a synchronous library): the synchronous
    driver calls it in place, the asynchronous one in a worker thread."""

    __slots__ = ("fn", "args", "done", "result")

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn = fn
        self.args = args
        self.done, self.result = False, None


#: What an agent's loop yields to its driver: fragments to show, or a request to carry out.
#: (An agent may yield plain Messages marked the older way, `extra['index']`: the driver converts them.)
LoopItem = Fragments | list["Message"] | Request
#: An agent's loop as a driver runs it: it yields fragments and requests and is sent each request's result.
AgentLoop = Generator[LoopItem, Any, Any]
_Item = TypeVar("_Item")
#: A helper's generator, used with `yield from` in a `_run`: it yields requests to the run's driver (typed Any so
#: that a `_run` declared `Iterator[list[Message]]` may use it) and returns a result of type `_Item`.
Asking = Generator[Any, Any, _Item]

__all__ = [
    "AgentLoop",
    "Asking",
    "Blocking",
    "Fragments",
    "LoopItem",
    "ModelCall",
    "Request",
    "ToolBatch",
    "ToolControl",
    "ToolWait",
    "View",
]


def pass_on(request: Request) -> Generator[Request, Any, tuple[Any, Exception | None]]:
    """For code that forwards another generator's requests: yield `request` to the driver and return (its result,
    None), or (None, the error the driver raised in its place) to be thrown back where the request came from:
    `value, error = yield from pass_on(item)`, then `item = step(gen, value, error)`."""
    try:
        return (yield request), None
    except Exception as e:
        return None, e


def step(gen: Generator[_Item, Any, Any], value: Any, error: BaseException | None) -> _Item:
    """The next item of a forwarded generator: `value` sent into it, or `error` thrown into it."""
    return gen.throw(error) if error is not None else gen.send(value)
