"""The served agents over AG-UI (the Agent-User Interaction protocol, 1.0): `chatagent serve --ag-ui`.

`POST /ag-ui/<agent name>` takes a `RunAgentInput` (JSON: threadId, runId, messages, tools, ...) and answers with
the run's AG-UI events as server-sent events (`chatagent.server.agui_events` says how chatagent's typed event
stream maps onto them).

A thread is a conversation of the session store, owned by the principal of the request's API key
(`chatagent.server.conversations`: another key naming the same threadId has a thread of its own), so the endpoint
needs API keys. The thread's history is the server's: of `messages`, only what follows the last assistant message
is new (the client may send the whole conversation, as AG-UI clients do). That is either new user messages, or
the results of the client's own tools the thread waits for (`tool` messages), and `resume` answers the
interrupts the last run ended with. Never does the client's copy of the history become the server's.

- **The client's tools** (`tools`): the agent may call them beside its own (a name one of its own tools has is a
  400). Such a call ends the run (RUN_FINISHED, `outcome.pendingToolCallIds` names it) as a question of the
  interrupts machinery (`chatagent.ask_user`): the paused turn is stored with the thread. The next request's tool
  message answers it and the run goes on; a result for a call the thread does not wait for is refused (400).
- **Interrupts**: a tool's question and a call waiting for approval end the run with RUN_FINISHED's interrupt
  outcome (`Interrupt`: id, reason `input_required` or `tool_approval`, message, responseSchema). The next request
  answers them with `resume`: [{interruptId, status: "resolved", payload}] (an approval's payload true or false;
  `cancelled` denies a call; a question cannot be cancelled: a new user message goes on without its answer).
- `state`, `context` and `forwardedProps` are refused when not empty (chatagent's agents take neither).

The principal, what needs approval, where the run may connect and what its sources are come from the served run's
context (`chatagent.server.turns.Where.trust`), as on every surface of `serve`; Host and Origin are checked by the
app, request bodies bounded, runs at once bounded.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections.abc import Callable
from typing import Any

import orjson

from chatagent.agent import Agent
from chatagent.errors import ChatAgentError
from chatagent.run.approval import APPROVAL
from chatagent.run.interrupts import ANSWERS, ask_user, pending_questions
from chatagent.run.trust import acting_as
from chatagent.schema import SYSTEM, USER, Message, to_messages
from chatagent.server.agui_events import AGUIEvents, Event, encoded, messages_snapshot
from chatagent.server.app import Service, _Watch, send_error  # pyright: ignore[reportPrivateUsage]
from chatagent.server.openai_api import ChatRequest, RequestError, checked_session_id
from chatagent.server.turns import Turn, reported, start_turn
from chatagent.sessions import Session
from chatagent.tools.tool import BaseTool

logger = logging.getLogger("chatagent.server")

_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RESTARTED = re.compile(r"(.+)-[0-9]+#0")  # a result for a call under the id a restarted stream gave it


class ClientTool(BaseTool):
    """A tool the AG-UI client runs: a call pauses the run on a question whose answer is the client's result."""

    third_party = True  # its name and description are the client's

    def __init__(self, name: str, description: str, parameters: Any) -> None:
        self.name, self.description = name, description
        if parameters is not None:
            self.parameters = parameters
        super().__init__()

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> Any:
        return ask_user(f"The client runs {self.name}.")  # the client's tool message answers it


class AGUIInput:
    """A checked `RunAgentInput`: the thread, the chat request it makes, the client's tools."""

    __slots__ = ("thread_id", "run_id", "request", "tools")

    def __init__(self, thread_id: str, run_id: str, request: ChatRequest, tools: dict[str, ClientTool]) -> None:
        self.thread_id, self.run_id, self.request, self.tools = thread_id, run_id, request, tools


def parse_input(body: bytes, model: str, agent: Agent) -> AGUIInput:
    """The run a `RunAgentInput` body asks for; RequestError 400 naming what is wrong (never echoing its content)."""
    try:
        given: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise RequestError(400, "the body is not JSON", "invalid_json") from None
    if not isinstance(given, dict):
        raise RequestError(400, "the body is an AG-UI RunAgentInput (a JSON object)", "invalid_input")
    thread = checked_session_id(_field(given, "threadId", str), "threadId")
    run_id = _field(given, "runId", str)
    assert thread is not None and run_id is not None
    for name in ("state", "context", "forwardedProps"):
        if given.get(name):
            raise RequestError(400, f"{name} is not taken by this server's agents: send it empty", "unsupported",
                               name)  # fmt: skip
    msgs, answers = _new_messages(_field(given, "messages", list))
    decision = _resume(given.get("resume") or [], answers)
    if decision and (answers or msgs):
        raise RequestError(400, "an approval is answered alone (resume with the decisions, no messages)",
                           "invalid_resume", "resume")  # fmt: skip
    if answers and msgs:
        raise RequestError(400, "the run waits for its tools' results and answers: send those alone (a new "
                           "message after them, in the next run)", "invalid_resume", "messages")  # fmt: skip
    if decision:
        request = ChatRequest([Message(USER, "", extra={APPROVAL: decision})], True, False, model, thread)
        request.decision = decision
    elif answers:
        request = ChatRequest([Message(USER, "", extra={ANSWERS: answers})], True, False, model, thread)
        request.answers = answers
    elif msgs:
        request = ChatRequest(msgs, True, False, model, thread)
    else:
        raise RequestError(400, "nothing new to run: messages end with the assistant's and resume is empty",
                           "nothing_new", "messages")  # fmt: skip
    return AGUIInput(thread, run_id, request, _client_tools(given.get("tools") or [], agent))


def _field(obj: Any, name: str, kind: type, where: str = "") -> Any:
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        raise RequestError(400, f"{where}{name} is a {'string' if kind is str else kind.__name__}, required",
                           "invalid_input", name)  # fmt: skip
    return value


def _resume(entries: Any, answers: dict[str, Any]) -> dict[str, bool]:
    """The approvals `resume` decides ({call id: approved}); its answers to questions go into `answers`."""
    if not isinstance(entries, list):
        raise RequestError(400, "resume is a list of {interruptId, status, payload}", "invalid_resume", "resume")
    decision: dict[str, bool] = {}
    for n, entry in enumerate(entries):
        iid = _field(entry, "interruptId", str, f"resume[{n}].")
        status = entry.get("status")
        if status not in ("resolved", "cancelled"):
            raise RequestError(400, f"resume[{n}].status is 'resolved' or 'cancelled'", "invalid_resume", "resume")
        if "#" in iid:  # a question (its id: the call's, '#', the question's number)
            if status != "resolved":
                raise RequestError(400, f"resume[{n}]: a question cannot be cancelled: send a new user message to go "
                                   "on without its answer", "invalid_resume", "resume")  # fmt: skip
            answers[iid] = entry.get("payload")
        elif status == "resolved" and not isinstance(entry.get("payload"), bool):
            raise RequestError(400, f"resume[{n}]: an approval is answered true or false", "invalid_resume", "resume")
        else:
            decision[iid] = status == "resolved" and entry["payload"]
    return decision


def _new_messages(given: list[Any]) -> tuple[list[Message], dict[str, Any]]:
    """The messages after the client's last assistant message (user and system ones), and the tool results
    among them as answers ({question id: result})."""
    roles = [m.get("role") if isinstance(m, dict) else None for m in given]
    last = max((i for i, r in enumerate(roles) if r == "assistant"), default=-1)
    msgs: list[Message] = []
    answers: dict[str, Any] = {}
    for n in range(last + 1, len(given)):
        m, role = given[n], roles[n]
        if role == "tool":
            answers[f"{_field(m, 'toolCallId', str, f'messages[{n}].')}#0"] = _text(m, n)
        elif role in ("user", "system", "developer"):
            if answers:
                raise RequestError(400, "a tool result is the last thing a run waits for: send new messages in the "
                                   "next run", "invalid_messages", "messages")  # fmt: skip
            msgs.append(Message(USER if role == "user" else SYSTEM, _text(m, n)))
        else:
            raise RequestError(400, f"messages[{n}]: a message of role {str(role)[:20]!r} is not new input",
                               "invalid_messages", "messages")  # fmt: skip
    return msgs, answers


def _text(m: dict[str, Any], n: int) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and
                                         isinstance(p.get("text"), str) for p in content):  # fmt: skip
        return "".join(p["text"] for p in content)
    raise RequestError(400, f"messages[{n}].content is text (a string, or parts of type text only)",
                       "unsupported_content", "messages")  # fmt: skip


def _client_tools(given: Any, agent: Agent) -> dict[str, ClientTool]:
    if not isinstance(given, list):
        raise RequestError(400, "tools is a list of {name, description, parameters}", "invalid_tool", "tools")
    out: dict[str, ClientTool] = {}
    for n, t in enumerate(given):
        name = _field(t, "name", str, f"tools[{n}].")
        if not _TOOL_NAME.fullmatch(name):
            raise RequestError(400, f"tools[{n}].name is 1 to 64 letters, digits, '_' or '-'", "invalid_tool", "tools")
        if name in agent.function_map or name in out:
            raise RequestError(400, f"the tool {name!r} is the agent's own (or given twice): a client's tool has a "
                               "name of its own", "tool_name_conflict", "tools")  # fmt: skip
        params = t.get("parameters")
        if params is not None and not (isinstance(params, dict) and params.get("type") == "object"):
            raise RequestError(400, f"tools[{n}].parameters is a JSON Schema of type object", "invalid_tool", "tools")
        out[name] = ClientTool(name, _field(t, "description", str, f"tools[{n}]."), params)
    return out


def with_client_tools(agent: Agent, tools: dict[str, ClientTool]) -> Agent:
    """`agent` for one run with the client's tools beside its own (a shallow copy: the agent is shared)."""
    if not tools:
        return agent
    if not hasattr(agent, "functions"):
        raise RequestError(400, "this agent calls no tools: it cannot take the client's", "tools_unsupported", "tools")
    run_agent = copy.copy(agent)
    run_agent.function_map = {**agent.function_map, **tools}
    return run_agent


class AGUIEndpoint:
    """`POST /ag-ui/<agent name>` (ASGI): a RunAgentInput in, the run's AG-UI events out (SSE)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        headers = dict(scope["headers"])
        try:
            user = svc.user_of(headers)
            model, agent = svc.agent_for(scope.get("path_params", {}).get("name", ""))
            body = await svc.read_json_body(headers, receive)
            if body is None:
                return
            given = parse_input(body, model, agent)
            if given.request.answers:
                await asyncio.to_thread(_named_back, svc, user, given.thread_id, given.request)
            run_agent = with_client_tools(agent, given.tools)
            if svc.running >= svc.max_concurrency:
                raise RequestError(429, "the server is busy; retry shortly", "busy")
        except RequestError as e:
            await send_error(send, e)
            return
        svc.running += 1
        try:
            with acting_as(svc.where.trust(user)):
                try:
                    turn = await start_turn(svc.where, run_agent, model, given.request, given.thread_id, user,
                                            len(body), events=True)  # fmt: skip
                except RequestError as e:
                    await send_error(send, e)
                    return
                mapped = AGUIEvents(given.thread_id, given.run_id, frozenset(given.tools))
                await _stream(turn, mapped, lambda: _thread(svc, user, given.thread_id), receive, send)
        finally:
            svc.running -= 1


def _named_back(svc: Service, user: str, thread: str, request: ChatRequest) -> None:
    """The client's results for calls it knows by the id a restarted model stream gave them (`<call id>-<n>`, see
    `chatagent.server.agui_events`) put under the id the thread's pending turn waits for (blocking)."""
    try:
        pending = Session(thread, svc.where.store(), user=user).pending_turn
    except ChatAgentError as e:  # the store: the turn's start meets it again and reports it
        logger.warning("could not read an AG-UI thread's pending turn (%s)", type(e).__name__)
        return
    waiting = {q["id"] for q in pending_questions(pending.response) or ()} if pending is not None else set()
    answers = dict(request.answers or {})
    for key in [k for k in answers if k not in waiting]:
        found = _RESTARTED.fullmatch(key)
        if found is not None and found[1] + "#0" in waiting and found[1] + "#0" not in answers:
            answers[found[1] + "#0"] = answers.pop(key)
    if answers != request.answers:
        request.answers, request.messages = answers, [Message(USER, "", extra={ANSWERS: answers})]


def _thread(svc: Service, user: str, thread: str) -> list[Message]:
    """The thread's conversation as its store holds it, a paused turn's part included (blocking)."""
    session = Session(thread, svc.where.store(), user=user)
    held = session.messages()
    pending = session.pending_turn
    if pending is not None:
        held += [m for m in pending.messages if m.get("role") != SYSTEM] + pending.response
    return to_messages(held)


async def _stream(
    turn: Turn, mapped: AGUIEvents, thread: Callable[[], list[Message]], receive: Any, send: Any
) -> None:  # fmt: skip
    watch = _Watch(receive)  # the client going away cancels this task; the thread's turn goes on and is stored
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE + turn.reply.headers()})
        await _body(send, mapped.started())
        try:
            async for ev in turn.run:
                out = mapped.map(ev)
                if out:
                    await _body(send, out)
            await asyncio.shield(turn.run.task)  # its turn is stored: the thread as the store has it goes out
            tail = [messages_snapshot(await asyncio.to_thread(thread), mapped.restarted), *mapped.finished()]
        except Exception as e:
            err = reported(e)
            tail = mapped.failed(err.message, err.code)
        watch.finished = True
        await send({"type": "http.response.body", "body": encoded(tail), "more_body": False})
    except asyncio.CancelledError:
        watch.absorb()
        logger.info("the AG-UI client went away: the thread's turn goes on, and is stored at its end")
    finally:
        watch.stop()
        await turn.close(detach=watch.gone)


async def _body(send: Any, events: list[Event]) -> None:
    await send({"type": "http.response.body", "body": encoded(events), "more_body": True})


__all__ = ["AGUIEndpoint", "AGUIInput", "ClientTool", "parse_input", "with_client_tools"]
