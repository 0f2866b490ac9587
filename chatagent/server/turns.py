"""One turn of a served agent, as every surface of `chatagent serve` starts it (the OpenAI API, MCP, A2A).

`start_turn` opens the request's conversation under its principal (`conversations`) or, without a session, resumes
paused calls only from a token the server signed (`approvals`), and starts the run (on a session, a run that can
outlive its client and a `"resume": true` request: `chatagent.server.detached`); `Reply` is what the server adds
to the answer (the conversation's id, the token of calls it paused on); `Outcome` is a whole answer as the final
messages say it (a message an output check replaced is replaced: no text it took back reaches the client).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chatagent.agent import Agent
from chatagent.run.approval import PENDING_APPROVAL
from chatagent.run.trust import Trust, acting_as, served
from chatagent.schema import ASSISTANT, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import Collector
from chatagent.server.approvals import APPROVAL_TOKEN, EXPECTED, ApprovalTokens, PausedCall, check_decided_calls
from chatagent.server.conversations import Quotas, open_conversation
from chatagent.server.detached import SessionRuns
from chatagent.server.identity import ANONYMOUS
from chatagent.server.openai_api import EXPECTED_ANSWER, PUBLIC_EXTRAS, ChatRequest, RequestError, error_for
from chatagent.sessions import SessionError

if TYPE_CHECKING:
    from chatagent.server.openai_api import Answer
    from chatagent.utils.url_fetch import URLPolicy

logger = logging.getLogger("chatagent.server")


class Reply:
    """What the server adds to an answer: the conversation's id, and the token of calls it paused on (without a
    session: see `chatagent.server.approvals`)."""

    __slots__ = ("tokens", "principal", "model", "session_id", "stateless")

    def __init__(self, tokens: ApprovalTokens, principal: str, model: str, session_id: str | None) -> None:
        self.tokens, self.principal, self.model, self.session_id = tokens, principal, model, session_id
        self.stateless = session_id is None

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"x-session-id", self.session_id.encode())] if self.session_id is not None else []

    def finish(self, answer: Answer) -> None:
        """Add the session id and, for a stateless run that paused, the approval token to `answer.extra`."""
        self.mark(answer.extra, answer.paused_calls() if self.stateless else [])

    def mark(self, extra: dict[str, Any], paused: list[PausedCall]) -> None:
        if self.session_id is not None:
            extra["session_id"] = self.session_id
            self.tokens.mark_resumable(extra, self.principal, self.model, self.session_id)  # no session_id needed
        if self.stateless and paused:
            extra[APPROVAL_TOKEN] = self.tokens.issue(self.principal, self.model, paused, extra[PENDING_APPROVAL])


class Turn:
    """A started run: its async iterator of fragment lists (`run`), the `reply`, and what `close` ends."""

    __slots__ = ("agent", "run", "reply", "ephemeral")

    def __init__(self, agent: Agent, run: Any, reply: Reply, ephemeral: str | None) -> None:
        self.agent, self.run, self.reply, self.ephemeral = agent, run, reply, ephemeral

    async def close(self, detach: bool = False) -> None:
        """Close the run (with `detach`, a session run goes on to its end and is stored); without a session, end the
        tools' state (a code sandbox) that lived for it."""
        try:
            await (self.run.aclose(detach=True) if detach and self.ephemeral is None else self.run.aclose())
        finally:
            if self.ephemeral is not None:
                await asyncio.to_thread(self.agent.close_session, self.ephemeral)


class Where:
    """What a turn needs of the server: its session store, approval tokens, quotas, run deadline, session runs, URL
    policy, and the callbacks of every run it serves (the recorder of `serve --traces`)."""

    __slots__ = ("store", "tokens", "quotas", "deadline", "runs", "policy", "callbacks")

    def __init__(
        self, store: Any, tokens: ApprovalTokens, quotas: Quotas, deadline: float | None, runs: SessionRuns,
        policy: URLPolicy, callbacks: tuple[Any, ...] = (),
    ) -> None:  # fmt: skip
        self.store, self.tokens, self.quotas, self.deadline, self.runs = store, tokens, quotas, deadline, runs
        self.policy, self.callbacks = policy, callbacks

    def trust(self, principal: str) -> Trust:
        """What a run for `principal` may do (`chatagent.run.trust`): reach its own state (none of anyone's without
        keys, where every client is the same principal: state is then kept per conversation the server issued),
        run code only with a person's approval, connect only where the server's URL policy allows."""
        return served(None if principal == ANONYMOUS else principal, self.policy)


async def start_turn(
    where: Where, agent: Agent, model: str, request: ChatRequest, named: str | None, user: str, size: int,
    events: bool = False,
) -> Turn:  # fmt: skip
    """Start `agent` on `request` for the principal `user`, acting as `where.trust(user)` says: on the conversation
    `named` (opened and checked, see `chatagent.server.conversations`), or without one (an approval then resumes the
    calls its token stands for). `where.store` is a function giving the session store (it may block). RequestError
    for what is refused. With `events`, the run yields its typed events (`run(..., events=True)`)."""
    with acting_as(where.trust(user)):  # the run takes it at its start, and every run nested in it from the run
        return await _started(where, agent, model, request, named, user, size, events)


async def _started(
    where: Where, agent: Agent, model: str, request: ChatRequest, named: str | None, user: str, size: int,
    events: bool,
) -> Turn:  # fmt: skip
    options: dict[str, Any] = {"callbacks": list(where.callbacks)} if where.callbacks else {}
    if request.resume_token is not None:  # an answer or a decision naming its paused conversation by the token
        named = where.tokens.session_of(request, named, user, model)
    if events:
        options["events"] = True
    if named is not None:
        try:
            opened = await asyncio.to_thread(
                lambda: open_conversation(where.store(), user, named, request, size, where.quotas)
            )
        except ValueError as e:
            raise RequestError(400, str(e), "invalid_session_id", "session_id") from None
        except SessionError as e:
            raise reported(e) from None
        reply = Reply(where.tokens, user, model, opened.session.id)
        try:
            run = await where.runs.start(
                agent, opened.session, opened.messages, request.resume, where.deadline, **options
            )
        except Exception as e:
            raise reported(e) from None
        return Turn(agent, run, reply, None)
    if request.answers is not None:
        raise RequestError(400, "without session_id, an answer has no stored questions to answer: run with a "
                           "session_id to pause and resume on questions; " + EXPECTED_ANSWER, "invalid_answer",
                           "session_id")  # fmt: skip
    messages = resumed(where.tokens, request, user, model) if request.decision is not None else request.messages
    ephemeral = f"serve-request-{uuid.uuid4().hex}"  # the tools' state (a code sandbox) lives as long as the run
    run = agent.arun(messages, delta_stream=True, deadline=where.deadline, session_id=ephemeral, **options)
    return Turn(agent, run, Reply(where.tokens, user, model, None), ephemeral)


def resumed(tokens: ApprovalTokens, request: ChatRequest, user: str, model: str) -> list[Message]:
    """Without a session: the conversation so far, the paused calls the request's token stands for, the approval
    (the client's own copy of the paused reply, an assistant message without text, is left out)."""
    if request.approval_token is None:
        raise RequestError(400, "without session_id, an approval needs the approval_token of the paused answer; "
                           + EXPECTED, "invalid_approval", "messages")  # fmt: skip
    paused, waiting = tokens.paused(request.approval_token, user, model)
    assert request.decision is not None
    check_decided_calls(request.decision, waiting)
    history = request.messages[:-1]
    while history and history[-1].role == ASSISTANT and not history[-1].text.strip():
        history = history[:-1]
    return [*history, *paused, request.messages[-1]]


def reported(e: Exception) -> RequestError:
    """How a failure of a run (or of its store) is told to the client; the server's log has the rest."""
    err = error_for(e)
    if err.status >= 500:
        logger.error("the agent failed", exc_info=e)
    elif err.status == 409:  # what the client is not told (the store's name) is for the log
        logger.info("refused: %s", e)
    return err


class Outcome:
    """A whole answer from a run's fragments: the assistant's text (each message's, joined by a blank line), the
    public extras of its last message (`chatagent.server.openai_api.PUBLIC_EXTRAS`), the calls it paused on."""

    __slots__ = ("collector",)

    def __init__(self) -> None:
        self.collector = Collector()

    def add(self, fragments: list[Fragment]) -> None:
        self.collector.add(fragments)

    def messages(self) -> list[Message]:
        return self.collector.messages()

    def result(self) -> tuple[str, dict[str, Any], list[PausedCall]]:
        """(text, public extras, paused calls) of the answer."""
        msgs = self.messages()
        said = [m for m in msgs if m.role == ASSISTANT]
        text = "\n\n".join(t for m in said if (t := content_text(m.content).strip()))
        last: Mapping[str, Any] = (said[-1].extra or {}) if said else {}
        extra = {k: last[k] for k in PUBLIC_EXTRAS if k in last}
        paused: list[PausedCall] = []
        if extra.get(PENDING_APPROVAL):
            for m in reversed(msgs):
                if m.role != ASSISTANT or m.function_call is None:
                    break
                fc = m.function_call
                paused.append(((m.extra or {}).get("function_id"), fc.name, fc.arguments))
            paused.reverse()
        return text, extra, paused


__all__ = ["Outcome", "Reply", "Turn", "Where", "reported", "resumed", "start_turn"]
