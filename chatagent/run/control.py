"""A run under plugins and tool approval (see `chatagent.plugins` and `chatagent.run.approval`).

`controlled(agent, plugins, ...)` is the agent's stream of fragments and requests with the plugins' hooks called
around it. It sits between the agent's loop and the driver, so one piece of code serves `run()` and `arun()`:

- `before_run` rewrites the conversation; `check_input` checks start in threads (`input_checks`: on every message,
  then on what the agent adds to each model call's input), and until they pass the output is held back (the
  model's pieces through a map on its call, so the model still starts at once) and no tool runs;
- output checks (`after_model`, `check_text`, `after_run`) hold the answer's text back until they pass
  (`holding`): whole, or per sentence or paragraph where the plugins allow it;
- model calls and tool batches pass through `before_model`/`after_model` and `before_tool`/`after_tool`; a batch
  with a call that needs approval is not run: the run pauses, marking the call `extra['pending_approval']`. A
  batch a loop carries out itself (`_call_tool`) comes to `gate` from the driver: the same rules hold;
- when the agent is done, `after_run` may rewrite the response (changes go out as fragments), retry it (the new
  answer replaces the rejected one) or block it; a block anywhere ends the run with the plugin's message.

What the caller has been shown is kept (`shown`) so that the last yield can change it: model replies are recorded
once per call, or piece by piece through a map only where placement is not plain (a view, a retry, held output).
An agent with neither plugins nor tools that may need approval under the run's policy (`RunContext.trust.approval`,
inherited by every nested run) never comes here.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from chatagent.errors import LoopExit
from chatagent.run.approval import PENDING_APPROVAL, Resume, call_id, may_pause, needs_approval, paused_call, resolve
from chatagent.run.durable import own_loop
from chatagent.run.holding import output_hold
from chatagent.run.input_checks import InputChecks
from chatagent.run.interrupts import Asked, announce, marker
from chatagent.run.plugin import BLOCKED_BY, BLOCKED_REASON, Blocked, Plugins, Retry, failed
from chatagent.run.requests import (
    AgentLoop,
    Asking,
    Blocking,
    Fragments,
    LoopItem,
    ModelCall,
    Request,
    ToolBatch,
    ToolWait,
)
from chatagent.run.stage import Stage, relay
from chatagent.run.tool_call import run_tool
from chatagent.schema import ASSISTANT, FUNCTION, USER, FunctionCall, Message, to_message
from chatagent.schema.fragment import Fragment, fragment, shift, typed
from chatagent.schema.stream import Collector, WholeLists
from chatagent.tools.base import result_content
from chatagent.tools.calling import ToolErrorKind
from chatagent.utils.current_call import PendingQuestion

if TYPE_CHECKING:
    from chatagent.run.context import RunContext
    from chatagent.run.protocol import Runnable

logger = logging.getLogger("chatagent.plugins")
_Result = TypeVar("_Result")


class _Paused(LoopExit):  # noqa: N818 (the run stops for approval: not an error)
    def __init__(self, waiting: list[dict[str, Any]]) -> None:
        super().__init__("waiting for approval")
        self.waiting = waiting


def controlled(
    agent: Runnable, plugins: Plugins, msgs: list[Message], lang: str, kwargs: dict[str, Any], ctx: RunContext,
    calls: list[Message] | None = None, waiting: list[dict[str, Any]] | None = None,
) -> AgentLoop:  # fmt: skip
    """`agent.loop(msgs, lang, kwargs)` (after `calls`, a resumed turn's unanswered calls) under `plugins` and tool
    approval, paused when a tool asks a question (`waiting`: questions still pending); use as the run's stream."""
    return _ControlledRun(agent, plugins, ctx).run(msgs, lang, kwargs, calls, waiting)


class _ControlledRun(Stage):
    """The run's control, as the stage its loop is relayed through (see the module docstring)."""

    __slots__ = (
        "agent", "plugins", "ctx", "shown", "hold", "checks", "held", "resume", "offset", "replace_at", "tripped",
        "stopped", "mapped", "whole",
    )  # fmt: skip

    def __init__(self, agent: Runnable, plugins: Plugins, ctx: RunContext) -> None:
        self.agent = agent
        self.plugins = plugins
        self.ctx = ctx
        ctx.controls = (*ctx.controls, self)  # drivers hand it the tool calls that do not pass through it
        self.shown = Collector()  # the response as the caller has seen it
        self.hold = output_hold(agent, plugins)  # the answer's text held back for the output checks, if any
        self.checks = InputChecks(agent, plugins)  # the input checks still to be settled
        self.held: list[Fragment] = []  # output waiting for them
        self.resume: Resume | None = None  # the decisions, while the paused calls run
        self.offset = 0  # where the current attempt's response starts in the shown one
        self.replace_at = -1  # the shown message the attempt's first fragment replaces (a retried answer)
        self.tripped: Exception | None = None  # an input check's error raised in our map (it ends the run)
        self.stopped: _Paused | Blocked | None = None  # a pause or block decided in `gate` (the loop cannot undo it)
        self.mapped = False  # the model call on its way: its pieces go through our map
        self.whole = False  # ... or it is hidden, its reply shown once it is done (held output checks)

    # ---- the run ---------------------------------------------------------------------------------------------

    def run(self, msgs: list[Message], lang: str, kwargs: dict[str, Any], calls: list[Message] | None,
            waiting: list[dict[str, Any]] | None) -> AgentLoop:  # fmt: skip
        agent, plugins = self.agent, self.plugins
        try:
            resume = None
            if may_pause(agent, self.ctx.trust.approval):  # else paused calls are a member's, for it to resume
                msgs, resume = resolve(msgs)
            for p, fn in plugins.each("before_run"):
                out = _message_list(plugins.call(p, "before_run", fn, agent, list(msgs)), p, "before_run")
                if out is not None:
                    msgs = out
            self.checks.start(msgs)
            if resume is not None:
                msgs = msgs + (yield from self._resume(resume, msgs, lang, kwargs))
            conversation = msgs
            self.offset = self._made_len()
            while True:  # the agent's loop ends (its model stream closed) before a pause's or a block's last yield
                yield from relay(own_loop(agent, conversation, lang, kwargs, calls, waiting), self)
                calls = waiting = None  # a retry goes on from their results (in the attempt): they ran
                yield from self._settle()
                if self.hold is not None:
                    out = self._show(self.hold.flush())
                    if out:
                        yield out
                response = self._made()
                try:
                    changed = self._after_run(response)
                except Retry as r:
                    attempt = response[self.offset :]
                    conversation = conversation + attempt + [Message.unchecked(USER, r.feedback)]
                    answer = _answer_index(response, self.offset)
                    self.offset, self.replace_at = answer, answer if answer < len(response) else -1
                    self.ctx.attempt += 1
                    continue
                if changed is not None or self.hold is not None:  # held text goes out as the hooks leave it
                    out = _rewrite(self.shown.messages(), response if changed is None else changed)
                    if out:
                        self.shown.add(out)
                        yield out
                return
        except (_Paused, Blocked) as stop:
            yield self._paused(stop.waiting) if isinstance(stop, _Paused) else self._blocked(stop)
        except (Asked, PendingQuestion) as stop:  # a tool (or a hook: PendingQuestion) asked a person something
            asked = stop.questions if isinstance(stop, Asked) else [stop.question]
            announce(self.ctx, asked)
            out = [marker(asked, self.ctx.answers, self._made_len())]
            self.shown.add(out)
            yield out

    # ---- the stage: the hooks around the agent's loop ---------------------------------------------------------

    def _stop_here(self) -> None:
        if self.stopped is not None:  # the loop caught it (a broad `except`): the run stops all the same
            raise self.stopped

    def show(self, fragments: Fragments) -> Fragments:
        self._stop_here()
        placed = self._place(fragments)
        if self.checks or self.held:
            if self.checks and not self.checks.done():
                self.held += placed  # until the input checks pass (shown by the next request, or at the end)
                return []
            self._check_results()
            placed, self.held = self.held + placed, []
        return self._show(placed)

    def request(self, request: Request) -> Asking[Request]:
        self._stop_here()
        self.mapped = self.whole = False
        if isinstance(request, ModelCall):
            if self.checks.done() and (self.checks or self.held):
                yield from self._settle()  # a check that tripped already: no need to ask the model
            plugins = self.plugins
            inner = len(request.maps)  # the maps of the runs inside this one; the plugins' come after
            for p, fn in plugins.each("before_model"):
                plugins.call(p, "before_model", fn, self.agent, request)
            self.checks.start_unseen(request.messages)  # what the agent added: a document's excerpts, ...
            self.mapped = self._map(request, inner)
            if not self.mapped and self.hold is not None and not request.hide:  # it holds the whole answer: the
                request.hide = self.whole = True  # reply streams to no one; what of it may show goes out when done
        elif isinstance(request, ToolBatch):
            request.seen.append(self)
            yield from self._settle()
            self._before_tools(request)
        elif isinstance(request, ToolWait):
            request.seen.append(self)
        return request

    def answer(self, request: Request, result: Any, error: Exception | None) -> Asking[Any]:
        if error is not None and error is self.tripped:
            raise error  # from our map: an input check tripped or failed
        if isinstance(request, ModelCall):
            if self.whole:
                out = self._show([fragment(m, request.start + i) for i, m in enumerate(result or ())])
                if out:
                    yield out
            elif not self.mapped and not request.hide:
                self._record(request)
            if error is None:
                plugins = self.plugins
                for p, fn in plugins.each("after_model", reverse=True):
                    plugins.call(p, "after_model", fn, self.agent, request, result)
        elif isinstance(request, ToolWait) and error is None and self.plugins.each("after_tool"):
            self.after_tool(result)
        return result

    def end(self, result: Any) -> Asking[Any]:
        self._stop_here()
        return result
        yield  # (a generator: see Stage.end)

    # ---- placing and recording what is shown -----------------------------------------------------------------

    def _show(self, fragments: list[Fragment]) -> list[Fragment]:
        """What of `fragments` the caller may see now (the output checks hold the rest), recorded as shown."""
        if self.hold is not None:
            fragments = self.hold.take(fragments)
        if fragments:
            self.shown.add(fragments)
        return fragments

    def _made(self) -> list[Message]:
        """The response as made (what `after_run` checks): with output checks, more than was shown."""
        return (self.shown if self.hold is None else self.hold.made).messages()

    def _made_len(self) -> int:
        return len(self.shown if self.hold is None else self.hold.made)

    def _place(self, given: Sequence[Message]) -> list[Fragment]:
        """An attempt's fragments at their place in the whole response (in place: fragments are single-use)."""
        fragments = shift(typed(given), self.offset)
        if self.replace_at >= 0:
            for f in fragments:
                if f.index == self.replace_at:
                    f.replace = True
                    self.replace_at = -1
                    break
        return fragments

    def _map(self, call: ModelCall, inner: int) -> bool:
        """Give `call` a map that places, holds and records its pieces, when recording its reply at the end would
        not do; whether it did. With checks that judge content it goes before the maps the plugins added (from
        `inner` on): what they derive from the text follows what the checks let out."""
        if call.hide:
            return False
        plain = call.view is None and not call.maps and not self.offset and self.replace_at < 0
        if plain and (self.hold is None or self.hold.holds_all) and self.checks.done():
            return False

        def place_hold_record(given: list[Fragment]) -> list[Fragment]:
            fragments = self._place(given)
            if self.checks:
                if not self.checks.done():
                    self.held += fragments
                    return []
                try:
                    self._check_results()
                except Exception as e:  # one tripped or failed: the stream ends, and it comes back to `answer`
                    self.tripped = e
                    raise
                if self.held:
                    fragments, self.held = self.held + fragments, []
            return self._show(fragments)

        if self.hold is not None and self.hold.judges:
            call.maps.insert(inner, place_hold_record)
        else:
            call.maps.append(place_hold_record)
        return True

    def _record(self, call: ModelCall) -> None:
        """Add a model reply that streamed out unchanged (no view, no placement) to what was shown."""
        reply: list[Message] = call.result or []
        if reply:
            self.shown.add([fragment(m, call.start + i) for i, m in enumerate(reply)])

    # ---- input checks ------------------------------------------------------------------------------------------

    def _settle(self) -> Generator[LoopItem, Any, None]:
        """Wait for the input checks (in a worker thread under `arun`), then show the output they held back."""
        if self.checks:
            if not self.checks.done():
                yield Blocking(self.checks.wait, self.ctx.deadline)
            self._check_results()
        if self.held:
            out, self.held = self._show(self.held), []
            if out:
                yield out

    def _check_results(self) -> None:
        try:
            self.checks.results()
        except Blocked:
            self.held = []  # a check tripped: what it held back is never shown
            raise

    # ---- tools -------------------------------------------------------------------------------------------------

    def gate(self, batch: ToolBatch) -> None:
        """`_before_tools` for a batch a driver carries out without it having passed through this stage (a loop that
        runs its tools itself, `_call_tool`): waits for the input checks in place, as it cannot yield. A pause or
        a block is raised into the loop, and again at its next step should the loop catch it."""
        try:
            if self.checks:
                self.checks.wait(self.ctx.deadline)
                self._check_results()
            self._before_tools(batch)
        except (_Paused, Blocked) as stop:
            self.stopped = stop
            raise

    def after_tool(self, outcome: Any) -> None:
        """The `after_tool` hooks on a call's outcome (its content replaced by what a hook returns)."""
        plugins = self.plugins
        for p, fn in plugins.each("after_tool", reverse=True):
            content = plugins.call(p, "after_tool", fn, self.agent, outcome)
            if content is not None:
                outcome.content = result_content(content)

    def _before_tools(self, batch: ToolBatch) -> None:
        """Approval and `before_tool` for a batch about to start: pause for calls that need a person."""
        waiting: list[dict[str, Any]] = []
        plugins = self.plugins
        policy = self.ctx.trust.approval  # the run's, whatever agent of it made the call
        for k, call in enumerate(batch.calls):
            if needs_approval(call.tool, call.args, policy):
                cid = call.outcome.call_id if call.outcome.call_id is not None else f"call_{k}"
                resume = self.resume
                if resume is None or (decision := resume.decisions.get(cid)) is None:
                    waiting.append({"id": cid, "name": call.tool.name, "arguments": call.outcome.arguments})
                    continue
                if not decision:
                    call.outcome.fail(ToolErrorKind.DENIED, resume.denial(call.tool.name))
                    call.ready = True
                    continue
            for p, fn in plugins.each("before_tool"):
                content = plugins.call(p, "before_tool", fn, self.agent, call)
                if content is not None:
                    call.outcome.content = result_content(content)
                    call.ready = True
                    break
        if waiting:
            raise _Paused(waiting)

    def _resume(
        self, resume: Resume, msgs: list[Message], lang: str, kwargs: dict[str, Any]
    ) -> Generator[LoopItem, Any, list[Message]]:
        """Run the paused calls as decided; their function messages (also shown)."""
        self.resume = resume
        results: list[Message] = []
        try:
            for k, m in enumerate(resume.calls):
                fc = paused_call(m)
                cid = call_id(m, k)
                content = yield from relay(
                    run_tool(self.agent, fc.name, fc.arguments, call_id=cid, messages=msgs, lang=lang, **kwargs), self
                )
                msg = Message.unchecked(FUNCTION, content, fc.name, None, None, {"function_id": cid})
                out = self._show([fragment(msg, self._made_len())])
                if out:
                    yield out
                results.append(msg)
        finally:
            self.resume = None  # the decisions were for these calls only
        return results

    # ---- the end -------------------------------------------------------------------------------------------

    def _after_run(self, response: list[Message]) -> list[Message] | None:
        """The response as the `after_run` hooks leave it, or None if none changed it."""
        current = response
        plugins, hold = self.plugins, self.hold
        for p, fn in plugins.each("after_run", reverse=True):
            try:
                value = plugins.call(p, "after_run", fn, self.agent, list(current))
            except Retry:
                if hold is None or hold.releases is None:
                    raise
                failed(p, "after_run", ValueError(_SHOWN.format(what="asked to retry")))
                continue
            out = _message_list(value, p, "after_run")
            if out is None:
                continue
            if hold is not None and not hold.keeps_released(self.shown.messages(), out):
                failed(p, "after_run", ValueError(_SHOWN.format(what="rewrote the answer")))
                continue
            if len(out) < len(response):
                failed(p, "after_run", ValueError(
                    f"it returned {len(out)} messages for a response of {len(response)}: a streamed response cannot "
                    "lose messages (replace a message instead)"))  # fmt: skip
                continue
            current = out
        return None if current is response else current

    def _paused(self, waiting: list[dict[str, Any]]) -> list[Fragment]:
        """The fragments that pause the run: the waiting calls, marked on the last message shown when they are the
        calls it ends with, else shown as calls of their own (a loop that ran its tools without showing the calls),
        so that the approval message that follows resumes them."""
        response = self.shown.messages()
        shown = _trailing_call_ids(response)
        missing = [] if shown is None else [w for w in waiting if w["id"] not in shown]
        at = len(response)
        out = [
            Fragment.unchecked(
                ASSISTANT, "", None, FunctionCall(w["name"], w["arguments"]), None, {"function_id": w["id"]}, at + n
            )  # fmt: skip
            for n, w in enumerate(missing)
        ]
        if out:
            assert out[-1].extra is not None
            out[-1].extra[PENDING_APPROVAL] = waiting
        else:
            out = [Fragment.unchecked(ASSISTANT, "", None, None, None, {PENDING_APPROVAL: waiting}, max(at - 1, 0))]
        self.shown.add(out)
        announce(self.ctx, approval=waiting)
        return out

    def _blocked(self, b: Blocked) -> list[Fragment]:
        """The fragment that ends a blocked run: the plugin's message, in place of the answer shown, if any."""
        logger.info("run blocked by %s: %s", b.plugin, b.reason or "(no reason given)")
        response = self.shown.messages()
        at = _answer_index(response, self.offset)
        if self.hold is not None and at < len(response) and (response[at].text or response[at].reasoning_content):
            at = len(response)  # text that passed its checks went out: the message comes after it
        extra: dict[str, Any] = {BLOCKED_BY: b.plugin}
        if b.reason:
            extra[BLOCKED_REASON] = b.reason
        out = [Fragment.unchecked(ASSISTANT, b.message, None, None, None, extra, at, at < len(response))]
        self.shown.add(out)
        return out


_SHOWN = (
    "it {what}, but text went out already: its plugins let text out per sentence or paragraph (releases=), and "
    "what went out cannot be taken back"
)


def _trailing_call_ids(response: list[Message]) -> set[str] | None:
    """The ids of the calls `response` ends with (None if one of them has no id: they are taken as the waiting
    calls, as before ids were checked)."""
    ids: set[str] = set()
    for m in reversed(response):
        if m.role != ASSISTANT or m.function_call is None:
            break
        fid = (m.extra or {}).get("function_id")
        if fid is None:
            return None
        ids.add(fid)
    return ids


def _answer_index(response: list[Message], start: int) -> int:
    """The index of the run's answer (its last message, if a text answer from `start` on), else the end."""
    if len(response) > start:
        last = response[-1]
        if (
            last.role == ASSISTANT
            and last.function_call is None
            and not (last.extra and PENDING_APPROVAL in last.extra)
        ):
            return len(response) - 1
    return len(response)


def _rewrite(response: list[Message], new: list[Message]) -> list[Fragment]:
    """The fragments that turn the shown `response` into `new` (extending where it only grew, else replacing)."""
    whole = WholeLists()
    whole.shown = [m.copy() for m in response]
    fragments = whole.fragments(new)
    for f in fragments:  # named as their message is, or the run would name a sub-agent's message after its agent
        if f.name is None and f.index < len(new):
            f.name = new[f.index].name
    return fragments


def _message_list(value: Any, plugin: Any, hook: str) -> list[Message] | None:
    """What a hook returned as Messages; None if it returned None (or something wrong, when its errors are
    ignored)."""
    if value is None:
        return None
    try:
        if not isinstance(value, list):
            raise TypeError(f"it returned {type(value).__name__}, not a list of messages")
        return [to_message(m) for m in cast("list[Any]", value)]
    except Exception as e:
        failed(plugin, hook, e)
        return None


__all__ = ["controlled"]
