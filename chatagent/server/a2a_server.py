"""The served agents over A2A (agent-to-agent, JSON-RPC binding, protocols 1.0 and 0.3): `chatagent serve --a2a`.

Each agent has an agent card (`/.well-known/agent-card.json` for the first agent, `/a2a/<name>/.well-known/
agent-card.json` for each: its name, description, a skill per tool, streaming) and a JSON-RPC endpoint
`/a2a/<name>` with `SendMessage`, `SendStreamingMessage` (the answer streamed as chunks of the artifact `answer`),
`GetTask` and `CancelTask` (and 0.3's `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, answered in
0.3's format: `server/a2a_wire.py`). The client's `messageId` is kept in the task's history. A task's context is a conversation of the session store, owned by the principal that
started it (`conversations`; a new context gets an id the server makes); a task belongs to its principal too
(another one's `GetTask` finds nothing). A run that pauses on a tool call needing approval leaves its task
`input-required` (the waiting calls in the status message's data part and in the task's metadata); the client
goes on with a message of the same task whose metadata (or a data part) holds `approval`: true, false or {call id:
true/false}; cancelling an `input-required` task drops the calls it paused on (its conversation goes on without
them). The tasks kept in memory are bounded by number (`MAX_TASKS`), by the bytes they hold (`max_task_bytes`) and
by age (a finished task is forgotten `task_ttl` seconds after it ended). A tool's question (`chatagent.ask_user`) leaves it `input-required` too (the questions under
`pending_questions`); the client answers with `answers`: {question id: answer} in the same way. A message's text and data parts are read; one with a file or URL part is refused, never answered in
part. The identity, approval and concurrency rules are the OpenAI endpoint's. Needs `a2a-sdk`: `pip install
'chatagent[a2a]'` (its protocol types give the wire format).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from typing import Any

import orjson
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from chatagent.agent import Agent
from chatagent.errors import ChatAgentError
from chatagent.run.approval import APPROVAL
from chatagent.run.interrupts import ANSWERS, PENDING_QUESTIONS
from chatagent.run.trust import acting_as
from chatagent.schema import USER, Message
from chatagent.server.a2a_wire import CURRENT, BadParams, Wire, card_json, wire_of
from chatagent.server.app import Service, send_error, send_json
from chatagent.server.approvals import checked_decision
from chatagent.server.conversations import NEW
from chatagent.server.openai_api import Answer, ChatRequest, RequestError, checked_session_id, client_answers
from chatagent.server.turns import Outcome, reported, start_turn
from chatagent.sessions import Session, SessionError

logger = logging.getLogger("chatagent.server")

CARD_PATH = "/.well-known/agent-card.json"
MAX_TASKS = 10_000  # tasks remembered (finished ones are forgotten first)
MAX_TASK_BYTES = 256 * 1024 * 1024  # what the tasks remembered may hold in all (their answers and messages)
TASK_TTL = 3600.0  # seconds a finished task is remembered
_NOT_FOUND, _NOT_CANCELABLE, _UNSUPPORTED, _PARAMS, _REQUEST, _METHOD, _INTERNAL = (
    -32001, -32002, -32004, -32602, -32600, -32601, -32603)  # fmt: skip
_FINAL = (pb.TASK_STATE_COMPLETED, pb.TASK_STATE_FAILED, pb.TASK_STATE_CANCELED, pb.TASK_STATE_INPUT_REQUIRED)
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class RpcError(ChatAgentError):
    """A JSON-RPC request we refuse: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def card(name: str, agent: Agent, url: str, keyed: bool) -> dict[str, Any]:
    """The agent card of `agent` served at `url` (JSON, as A2A clients read it)."""
    skills = [pb.AgentSkill(id=tool, name=tool, description=t.description or tool, tags=["tool"])
              for tool, t in agent.function_map.items()]  # fmt: skip
    if not skills:
        skills = [pb.AgentSkill(id=name, name=name, description=agent.description or name, tags=["chat"])]
    out = pb.AgentCard(
        name=name, description=agent.description or f"The agent {name}.", version="1.0",
        capabilities=pb.AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"], skills=skills,
    )  # fmt: skip
    if keyed:
        out.security_schemes["bearer"].http_auth_security_scheme.scheme = "Bearer"
        out.security_requirements.add().schemes["bearer"].SetInParent()
    return card_json(out, url)


class TaskRecord:
    """One task: whose it is, its conversation (context), state, answer so far, and the run that works on it."""

    __slots__ = ("id", "context_id", "owner", "model", "state", "text", "extra", "history", "runner", "listeners",
                 "ended", "size")  # fmt: skip

    def __init__(self, owner: str, model: str) -> None:
        self.id = uuid.uuid4().hex
        self.context_id = ""
        self.owner, self.model = owner, model
        self.state = pb.TASK_STATE_SUBMITTED
        self.text = ""
        self.extra: dict[str, Any] = {}
        self.history: list[pb.Message] = []
        self.runner: asyncio.Task[None] | None = None
        self.listeners: list[asyncio.Queue[pb.StreamResponse | None]] = []
        self.ended: float | None = None  # when it last stopped working (monotonic), if it did
        self.size = 0  # the bytes it holds, as of its last change

    def measure(self) -> None:
        self.size = len(self.text) + sum(m.ByteSize() for m in self.history) + len(orjson.dumps(self.extra))

    def task(self) -> pb.Task:
        status = pb.TaskStatus(state=self.state)
        status.timestamp.GetCurrentTime()
        if self.state == pb.TASK_STATE_INPUT_REQUIRED and self.extra.get(PENDING_QUESTIONS):
            data = {PENDING_QUESTIONS: self.extra[PENDING_QUESTIONS]}
            status.message.CopyFrom(_message(pb.ROLE_AGENT, self, "The agent asks: " + " ".join(
                str(q["question"]) for q in data[PENDING_QUESTIONS]), data))  # fmt: skip
        elif self.state == pb.TASK_STATE_INPUT_REQUIRED:
            data = {"pending_approval": self.extra.get("pending_approval", [])}
            status.message.CopyFrom(_message(pb.ROLE_AGENT, self, "Waiting for approval of: " + ", ".join(
                w["name"] for w in data["pending_approval"]), data))  # fmt: skip
        out = pb.Task(id=self.id, context_id=self.context_id, status=status, history=self.history)
        if self.text:
            out.artifacts.append(pb.Artifact(artifact_id="answer", name="answer", parts=[pb.Part(text=self.text)]))
        if self.extra:
            out.metadata.update(self.extra)
        return out

    def emit(self, event: pb.StreamResponse | None) -> None:
        for q in self.listeners:
            q.put_nowait(event)


def _message(role: int, rec: TaskRecord, text: str, data: dict[str, Any] | None = None, mid: str = "") -> pb.Message:
    m = pb.Message(message_id=mid or uuid.uuid4().hex, role=role, task_id=rec.id, context_id=rec.context_id)  # type: ignore[arg-type]
    m.parts.append(pb.Part(text=text))
    if data is not None:
        m.parts.add().data.struct_value.update(data)
    return m


class A2AEndpoint:
    """`/.well-known/agent-card.json`, `/a2a/<name>/.well-known/agent-card.json` and `/a2a/<name>` (ASGI)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.tasks: OrderedDict[str, TaskRecord] = OrderedDict()
        self.max_task_bytes = MAX_TASK_BYTES
        self.task_ttl = TASK_TTL

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        path: str = scope["path"]
        name = svc.default_model if path == CARD_PATH else path.removeprefix("/a2a/").removesuffix(CARD_PATH)
        try:
            model, agent = svc.agent_for(name)
            headers = dict(scope["headers"])
            user = svc.user_of(headers)  # with keys, the card too is for clients that have one
            if path.endswith(CARD_PATH):
                if scope["method"] != "GET":
                    raise RequestError(405, "GET the agent card")
                await send_json(send, 200, card(model, agent, _base(scope) + f"/a2a/{model}", svc.principals.required))
                return
            if scope["method"] != "POST":
                raise RequestError(405, "POST JSON-RPC requests here")
            body = await svc.read_body(headers, receive)
        except RequestError as e:
            await send_error(send, e)
            return
        if body is None:
            return
        await self._rpc(body, user, model, agent, send)

    async def _rpc(self, body: bytes, user: str, model: str, agent: Agent, send: Any) -> None:
        rid: Any = None
        try:
            try:
                req = orjson.loads(body)
            except orjson.JSONDecodeError:
                raise RpcError(-32700, "the body is not JSON") from None
            if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str):
                raise RpcError(_REQUEST, "a JSON-RPC 2.0 request object is expected")
            rid, method, params = req.get("id"), req["method"], req.get("params") or {}
            wire = wire_of(method)
            if wire is None:
                raise RpcError(_METHOD, f"unknown method {method!r:.60} (SendMessage, SendStreamingMessage, GetTask, "
                               "CancelTask; 0.3: message/send, message/stream, tasks/get, tasks/cancel)")  # fmt: skip
            op = wire.methods[method]
            if op == "stream":
                rec = await self._start(self._sent(wire, params), user, model, agent)
                await self._stream(rec, rid, send, wire)
                return
            if op == "send":
                rec = await self._start(self._sent(wire, params), user, model, agent)
                if rec.runner is not None:
                    await asyncio.shield(rec.runner)
                result: Any = wire.task(rec.task(), sent=True)
            elif op == "get":
                result = wire.task(self._owned(wire.task_id(params), user).task())
            else:
                result = wire.task(await self._cancel(self._owned(wire.task_id(params), user)))
            await send_json(send, 200, {"jsonrpc": "2.0", "id": rid, "result": result})
        except RpcError as e:
            await send_json(send, 200, _error(rid, e))

    @staticmethod
    def _sent(wire: Wire, params: Any) -> pb.Message:
        try:
            return wire.message(params)
        except BadParams as e:
            raise RpcError(_PARAMS, str(e)) from None

    def _owned(self, tid: str | None, user: str) -> TaskRecord:
        rec = self.tasks.get(tid) if tid is not None else None
        if rec is None or rec.owner != user:  # another principal's task is no task at all
            raise RpcError(_NOT_FOUND, "no such task")
        return rec

    async def _start(self, sent: pb.Message, user: str, model: str, agent: Agent) -> TaskRecord:
        kinds = {p.WhichOneof("content") for p in sent.parts} - {"text", "data"}
        if kinds:  # said, not dropped: the agent would answer a message it never saw whole
            raise RpcError(
                _UNSUPPORTED, f"only text and data parts are taken, not {', '.join(sorted(map(str, kinds)))}"
            )
        if self.service.running >= self.service.max_concurrency:
            raise RpcError(_INTERNAL, "the server is busy; retry shortly")
        text = "\n".join(p.text for p in sent.parts if p.HasField("text"))
        meta = json_format.MessageToDict(sent.metadata)
        for p in sent.parts:
            if p.HasField("data"):
                meta = {**json_format.MessageToDict(p.data), **meta}
        if sent.task_id:  # going on with a task: it must be this principal's, waiting for input
            rec = self._owned(sent.task_id, user)
            if rec.state != pb.TASK_STATE_INPUT_REQUIRED:
                raise RpcError(_UNSUPPORTED, "this task is not waiting for input")
        else:
            rec = TaskRecord(user, model)
            rec.context_id = sent.context_id or NEW
        try:
            named = checked_session_id(rec.context_id, "contextId")
            msgs = [Message(USER, text)]
            decision = answers = None
            if APPROVAL in meta:
                decision = checked_decision(meta[APPROVAL])
                msgs = [Message(USER, text, extra={APPROVAL: decision})]
            elif ANSWERS in meta:  # the answers to the task's questions (chatagent.ask_user)
                answers = client_answers([{"role": USER, "extra": {ANSWERS: meta[ANSWERS]}}])
                msgs = [Message(USER, "", extra={ANSWERS: answers})]
            elif not text.strip():
                raise RequestError(400, "the message has no text")
            request = ChatRequest(msgs, True, False, model, named)
            request.decision, request.answers = decision, answers
            turn = await start_turn(self.service.where, agent, model, request, named, user, len(text))
        except RequestError as e:
            raise RpcError(_PARAMS if e.status < 500 else _INTERNAL, e.message) from None
        rec.context_id = turn.reply.session_id or rec.context_id
        rec.history.append(_message(pb.ROLE_USER, rec, text, mid=sent.message_id[:200]))
        rec.state, rec.text, rec.extra, rec.ended = pb.TASK_STATE_WORKING, "", {}, None
        self._remember(rec)
        rec.runner = asyncio.get_running_loop().create_task(self._work(rec, turn))
        return rec

    def _remember(self, rec: TaskRecord) -> None:
        rec.measure()
        self.tasks[rec.id] = rec
        self.tasks.move_to_end(rec.id)
        self._forget(rec)

    def _forget(self, keep: TaskRecord) -> None:
        """Forget the tasks that ended `task_ttl` ago, then, oldest first (finished ones first), those past
        `MAX_TASKS` or `max_task_bytes`; never `keep`."""
        now = time.monotonic()
        for old in [k for k, r in self.tasks.items() if r.ended is not None and now - r.ended >= self.task_ttl]:
            if old != keep.id:
                del self.tasks[old]
        held = sum(r.size for r in self.tasks.values())
        while len(self.tasks) > 1 and (len(self.tasks) > MAX_TASKS or held > self.max_task_bytes):
            others = [k for k in self.tasks if k != keep.id]
            oldest = next((k for k in others if self.tasks[k].state in _FINAL), others[0])
            held -= self.tasks.pop(oldest).size

    async def _work(self, rec: TaskRecord, turn: Any) -> None:
        svc = self.service
        outcome, answer = Outcome(), Answer()
        svc.running += 1
        try:
            with acting_as(svc.where.trust(rec.owner)):
                async for fragments in turn.run:
                    outcome.add(fragments)
                    piece, _ = answer.add(fragments)
                    if piece:
                        rec.emit(_artifact(rec, piece, append=bool(rec.text), last=False))
                        rec.text += piece
            text, extra, _ = outcome.result()
            rec.text, rec.extra = text, extra
            waits = extra.get("pending_approval") or extra.get(PENDING_QUESTIONS)
            rec.state = pb.TASK_STATE_INPUT_REQUIRED if waits else pb.TASK_STATE_COMPLETED
        except asyncio.CancelledError:
            rec.state = pb.TASK_STATE_CANCELED
        except Exception as e:
            rec.state, rec.extra = pb.TASK_STATE_FAILED, {"error": reported(e).message}
        finally:
            svc.running -= 1
            await asyncio.shield(turn.close())
            if rec.text:
                rec.history.append(_message(pb.ROLE_AGENT, rec, rec.text))
            if rec.text:
                rec.emit(_artifact(rec, rec.text, append=False, last=True))  # the whole answer, as the task has it
            rec.ended = time.monotonic()
            if rec.id in self.tasks:
                rec.measure()
                self._forget(rec)
            rec.emit(pb.StreamResponse(status_update=pb.TaskStatusUpdateEvent(
                task_id=rec.id, context_id=rec.context_id, status=rec.task().status)))  # fmt: skip
            rec.emit(None)

    async def _cancel(self, rec: TaskRecord) -> pb.Task:
        if rec.runner is None or rec.runner.done():
            if rec.state == pb.TASK_STATE_INPUT_REQUIRED:
                rec.state = pb.TASK_STATE_CANCELED  # nothing runs: the paused calls are dropped with it
                await asyncio.to_thread(self._drop_paused, rec)
                return rec.task()
            raise RpcError(_NOT_CANCELABLE, "the task has ended")
        rec.runner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(rec.runner), 30)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            pass
        return rec.task()

    def _drop_paused(self, rec: TaskRecord) -> None:
        """Drop the turn a cancelled task paused on from its conversation: no approval can run its calls now."""
        try:
            session = Session(rec.context_id, self.service.where.store(), user=rec.owner)
            pending = session.pending_turn
            if pending is not None and pending.state == "paused":
                session.discard_pending()
        except SessionError as e:
            raise RpcError(_INTERNAL, reported(e).message) from None

    async def _stream(self, rec: TaskRecord, rid: Any, send: Any, wire: Wire = CURRENT) -> None:
        queue: asyncio.Queue[pb.StreamResponse | None] = asyncio.Queue()
        rec.listeners.append(queue)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE})
            first = _event(rid, wire, pb.StreamResponse(task=rec.task()))
            await send({"type": "http.response.body", "body": first, "more_body": True})
            while (event := await queue.get()) is not None:
                await send({"type": "http.response.body", "body": _event(rid, wire, event), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            rec.listeners.remove(queue)


def _artifact(rec: TaskRecord, text: str, *, append: bool, last: bool) -> pb.StreamResponse:
    art = pb.Artifact(artifact_id="answer", name="answer", parts=[pb.Part(text=text)])
    return pb.StreamResponse(artifact_update=pb.TaskArtifactUpdateEvent(
        task_id=rec.id, context_id=rec.context_id, artifact=art, append=append, last_chunk=last))  # fmt: skip


def _event(rid: Any, wire: Wire, event: pb.StreamResponse) -> bytes:
    result = wire.event(event)
    return b"data: " + orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + b"\n\n"


def _error(rid: Any, e: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}


def _base(scope: dict) -> str:
    """The URL the client reached this server by (its Host was checked by the app)."""
    host = dict(scope["headers"]).get(b"host", b"127.0.0.1").decode("latin-1")
    return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}"


__all__ = ["CARD_PATH", "A2AEndpoint", "card"]
