"""RunContext: the state of one run (usage, deadline, callbacks, plugins, ...) and `current_run()`, the context of
the run whose code is executing now (a context variable the run handles and sub-agent runs set)."""

from __future__ import annotations

import time
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.base import Usage
from chatagent.llm.prepare import Marked
from chatagent.utils.current_call import CALL_ID
from chatagent.utils.url_fetch import URLPolicy, url_policy

if TYPE_CHECKING:
    from chatagent.run.events import Callback
    from chatagent.run.requests import ToolControl

CURRENT: ContextVar[RunContext | None] = ContextVar("chatagent_run", default=None)


class CallKeys(Protocol):
    """Where a run finds the idempotency keys of a stored turn's calls (`chatagent.sessions.turn.Turn.get`)."""

    def get(self, call_id: str, /) -> str | None: ...


class RunContext:
    """Per-run state, readable while and after the run: token usage, the deadline, the callbacks,
    how often each tool was called, generate_cfg for this run only, the agent it belongs to, the conversation's
    session_id, the plugins, how often a plugin retried the run (`attempt`), the validated structured answer
    (`output`, with `response_format`), the run this one is part of (`parent`, for a sub-agent's part), the
    controls over its tool calls (`controls`: its own and its parents', see `chatagent.run.requests.ToolControl`),
    where its outbound connections may lead (`egress`), and for a tool running now, its call's id (`call_id`) and
    a key for its side effects (`idempotency_key`)."""

    __slots__ = (
        "usage",
        "deadline",
        "callbacks",
        "tool_calls",
        "generate_cfg",
        "agent_name",
        "session_id",
        "session",
        "plugins",
        "attempt",
        "output",
        "parent",
        "trace",
        "recording",
        "controls",
        "turn_key",
        "call_keys",
        "marked",
        "egress",
    )
    trace: Any  # a traced run's RunTrace (chatagent.run.telemetry): told of its calls and its end
    recording: Any  # how a recorded run is kept in its trace (chatagent.run.traces)
    turn_key: str | None  # the stored turn's (a run with a session), else made when first asked
    call_keys: CallKeys  # a stored turn's calls: function id -> their idempotency key (`get`)
    marked: Marked  # the run's tool results as the model gets them (chatagent.llm.prepare.marked_data)
    # The run's URL policy: what every outbound connection of the run (files, web tools, A2A, MCP over HTTP) is held
    # to; None: anywhere (the machine's own user). Taken from the surface that started the run (`chatagent serve`
    # runs its clients' requests under `public_urls_only`); a nested run inherits it.
    egress: URLPolicy | None

    def __init__(
        self, deadline: float | None = None, callbacks: tuple[Callback, ...] = (), agent_name: str | None = None
    ) -> None:
        self.usage = Usage()
        self.deadline = deadline  # time.monotonic() value, or None
        self.callbacks = callbacks  # see chatagent.events; empty means no Event is ever built
        self.tool_calls: dict[str, int] = {}
        self.generate_cfg: dict[str, Any] | None = None
        self.agent_name = agent_name
        self.session_id: str | None = None  # run(..., session_id=...): tools keep per-conversation state under it
        self.session: Any = None  # run(..., session=...): the chatagent.Session (its user, its id)
        self.plugins: Any = None  # a chatagent.plugins.Plugins, or None when the run has none
        self.attempt = 0  # retries asked for by a plugin (chatagent.plugins.Retry)
        self.output: Any = None  # the validated answer, with response_format
        self.parent: RunContext | None = None
        self.trace, self.recording = None, None
        self.controls: tuple[ToolControl, ...] = ()  # the controlled runs this one is part of, outermost first
        self.turn_key, self.call_keys, self.marked = None, {}, {}  # for idempotency keys (see below); marked data
        self.egress = url_policy()

    @property
    def call_id(self) -> str | None:
        """The id of the tool call whose code is running now (as the model gave it); None outside a tool."""
        return CALL_ID.get()

    @property
    def idempotency_key(self) -> str | None:
        """A key for the side effects of the tool call running now, the same when a resumed turn runs the call
        again (`Agent.resume`): give it to the outside system (a payment API's Idempotency-Key, a unique column)
        so that the effect happens once. None outside a tool."""
        call_id = CALL_ID.get()
        if call_id is None:
            return None
        key = self.call_keys.get(call_id)
        if key is None:
            if self.turn_key is None:
                self.turn_key = uuid.uuid4().hex
            key = f"{self.turn_key}:{call_id}"
        return key

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunDeadlineExceeded("the run went past its deadline")

    def child(self, agent_name: str | None) -> RunContext:
        """The context of a sub-agent's part of this run: same deadline, callbacks and usage totals."""
        ctx = RunContext(self.deadline, self.callbacks, agent_name)
        ctx.usage = self.usage
        ctx.session_id = self.session_id
        ctx.turn_key, ctx.call_keys = self.turn_key, self.call_keys
        ctx.session = self.session
        ctx.parent = self
        ctx.controls = self.controls
        ctx.egress = self.egress
        return ctx


def current_run() -> RunContext:
    """The context of the run whose code is executing now (a fresh one outside any run)."""
    ctx = CURRENT.get()
    return ctx if ctx is not None else RunContext()
