"""RunContext: the state of one run (usage, deadline, callbacks, plugins, ...) and `current_run()`, the context of
the run whose code is executing now (a context variable the run handles and sub-agent runs set).

A run's trust (its principal, approval policy and URL policy) and the provenance of what its models read are
properties of its context: a nested run (an agent as a tool, a handoff, a crew's task, a group chat's turn: every
`run_subagent`) takes them from the run it is part of (`child`), a run started by a running one's code (a tool or a
flow step that runs an agent) from that run, any other from its surface (`acting_as`, see `chatagent.run.trust`).
No nested run, tool, memory, task or flow decides them: each reads them from here."""

from __future__ import annotations

import time
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.base import Usage
from chatagent.llm.prepare import Marked
from chatagent.run.trust import Provenance, Trust, surface_trust
from chatagent.utils.current_call import CALL_ID

if TYPE_CHECKING:
    from chatagent.run.events import Callback
    from chatagent.run.requests import ToolControl
    from chatagent.utils.url_fetch import URLPolicy

CURRENT: ContextVar[RunContext | None] = ContextVar("chatagent_run", default=None)


class CallKeys(Protocol):
    """Where a run finds the idempotency keys of a stored turn's calls (`chatagent.sessions.turn.Turn.get`)."""

    def get(self, call_id: str, /) -> str | None: ...


class RunContext:
    """Per-run state, readable while and after the run: its id (`run_id`, an event's), token usage, the deadline, the callbacks,
    how often each tool was called, generate_cfg for this run only, the agent it belongs to, the conversation's
    session_id, the plugins, how often a plugin retried the run (`attempt`), the validated structured answer
    (`output`, with `response_format`), the run this one is part of (`parent`, for a sub-agent's part), the
    controls over its tool calls (`controls`: its own and its parents', see `chatagent.run.requests.ToolControl`),
    whom it acts for and what it may do (`trust`: principal, approval policy, `egress`), where the text its models
    read came from (`provenance`), for a tool running now, its call's id (`call_id`) and a key for its side
    effects (`idempotency_key`), and the answers a person gave to the questions of the calls it resumes
    (`answers`, see `chatagent.run.interrupts`)."""

    __slots__ = (
        "run_id",
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
        "trust",
        "provenance",
        "answers",
        "asked",
        "events",
        "asking",
    )
    trace: Any  # a traced run's RunTrace (chatagent.run.telemetry): told of its calls and its end
    recording: Any  # how a recorded run is kept in its trace (chatagent.run.traces)
    turn_key: str | None  # the stored turn's (a run with a session), else made when first asked
    call_keys: CallKeys  # a stored turn's calls: function id -> their idempotency key (`get`)
    marked: Marked  # the run's tool results as the model gets them (chatagent.llm.prepare.marked_data)
    trust: Trust  # whom the run acts for, what waits for a person, where it may connect (chatagent.run.trust)
    provenance: Provenance  # the untrusted sources its models (and those of the runs nested in it) have read
    output: Any  # the validated answer, with response_format

    def __init__(
        self, deadline: float | None = None, callbacks: tuple[Callback, ...] = (), agent_name: str | None = None
    ) -> None:
        self.run_id = uuid.uuid4().hex[:16]  # the run's id in its events, unique (never a reused memory address)
        self.usage = Usage()
        self.deadline = deadline  # time.monotonic() value, or None
        self.callbacks = callbacks  # see chatagent.events; empty means no Event is ever built
        self.tool_calls: dict[str, int] = {}
        self.generate_cfg: dict[str, Any] | None = None
        self.agent_name = agent_name
        self.session_id: str | None = None  # run(..., session_id=...): tools keep per-conversation state under it
        self.session: Any = None  # run(..., session=...): the chatagent.Session (its user, its id)
        self.plugins: Any = None  # a chatagent.plugins.Plugins, or None when the run has none
        self.attempt, self.output = 0, None  # retries asked for by a plugin (chatagent.plugins.Retry); the answer
        self.parent: RunContext | None = None
        self.trace, self.recording = None, None
        self.controls: tuple[ToolControl, ...] = ()  # the controlled runs this one is part of, outermost first
        self.turn_key, self.call_keys, self.marked = None, {}, {}  # for idempotency keys (see below); marked data
        run = CURRENT.get()  # a run started by a running one's code acts as it does; any other as its surface says
        self.trust, self.provenance = (run.trust, run.provenance) if run else (surface_trust(), Provenance())
        self.answers: dict[str, Any] = {}  # a person's answers to the questions of paused calls (run.interrupts)
        self.asked: dict[str, int] = {}  # how many questions each tool call asked in this run (ask_user)
        self.events: Any = None  # run(..., events=True): the listener the event stream is made from (run.event_stream)
        self.asking: tuple[str, tuple[Any, ...]] | None = None  # a plugin's hook running: (its name, its arguments)

    @property
    def egress(self) -> URLPolicy | None:
        """The URL policy every outbound connection of the run is held to (None: any URL)."""
        return self.trust.egress

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
        """The context of a sub-agent's part of this run: same deadline, callbacks, usage, trust and provenance."""
        ctx = RunContext(self.deadline, self.callbacks, agent_name)
        ctx.parent, ctx.trust, ctx.provenance = self, self.trust, self.provenance  # what a nested run inherits
        ctx.usage = self.usage
        ctx.session_id = self.session_id
        ctx.turn_key, ctx.call_keys = self.turn_key, self.call_keys
        ctx.session = self.session
        ctx.controls = self.controls
        ctx.answers = self.answers
        return ctx


def current_run() -> RunContext:
    """The context of the run whose code is executing now (a fresh one outside any run)."""
    ctx = CURRENT.get()
    return ctx if ctx is not None else RunContext()


def current_trust() -> Trust:
    """The trust of the run whose code is executing now, else the surface's (`acting_as`), else the local user's."""
    ctx = CURRENT.get()
    return ctx.trust if ctx is not None else surface_trust()
