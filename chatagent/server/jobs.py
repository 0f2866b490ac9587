"""Background jobs over `chatagent serve` (`jobs=True`; `chatagent[dbos]`, a PostgreSQL store): a client submits a
turn, a crew or a flow to run on the DBOS workers (`chatagent.workers`), then polls it or streams it, under the
same principals and rules as every other request of the server.

    POST /v1/jobs            {"model": "assistant", "messages": [...], "session_id": "new" | id}   a turn
                             {"model": "assistant", "session_id": id, "resume": true}         continue a pending turn
                             {"model": "assistant", "session_id": id, "messages": [approval]} decide a paused one
                             {"model": "review", "inputs": {...}}                             a crew (served as agent)
                             {"flow": "trip", "inputs": {...}}   {"flow": "trip", "flow_id": id, "feedback": "..."}
    GET  /v1/jobs/{id}       where it stands: state, the messages it completed, what it waits for, its output
    GET  /v1/jobs/{id}/events   the same as server-sent events: each completed message, then the status
    DELETE /v1/jobs/{id}     cancel it

A job belongs to the principal that submitted it (its owner is on the job's record): any other principal gets
404 for it, as for an id that does not exist. A turn runs on the principal's own conversation (checked as a chat
request's is: `chatagent.server.conversations`), its media URLs checked against the server's URL policy, which
the job carries to the worker (`public_only`, `allow_hosts`). A principal may have `max_jobs` jobs not yet ended.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import orjson

from chatagent.agents.teams.crew import CrewAgent
from chatagent.flows.flow import PAUSED
from chatagent.schema import to_messages
from chatagent.server.app import Service, send_error, send_json
from chatagent.server.conversations import NEW, open_conversation
from chatagent.server.openai_api import PUBLIC_EXTRAS, RequestError, parse_request
from chatagent.sessions import SessionError
from chatagent.sessions.flow_states import FlowStates
from chatagent.workers.client import Jobs, JobStatus
from chatagent.workers.jobs import JobSpec, new_job_id, waiting_for

if TYPE_CHECKING:
    from chatagent.workers.client import Job

DEFAULT_MAX_JOBS = 100
_POLL_S = 0.25
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class JobsEndpoint:
    """`/v1/jobs` and `/v1/jobs/{id}[/events]` (see the module docstring)."""

    def __init__(
        self, service: Service, store_url: str, *, flows: tuple[str, ...] = (), dbos_schema: str = "dbos",
        queue: str = "chatagent", max_jobs: int = DEFAULT_MAX_JOBS, stream_timeout: float = 3600.0,
    ) -> None:  # fmt: skip
        self.service = service
        self.jobs = Jobs(store_url, dbos_schema=dbos_schema, queue=queue)
        self.flows = frozenset(flows)
        self.max_jobs = max_jobs
        self.stream_timeout = stream_timeout

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        method = scope["method"]
        try:
            user = svc.user_of(dict(scope["headers"]))
            job_id = scope.get("path_params", {}).get("job_id")
            if job_id is None:
                if method != "POST":
                    raise RequestError(405, "POST /v1/jobs submits a job; GET /v1/jobs/{id} reads one", "not_found")
                await self._submit(scope, receive, send, user)
                return
            events = job_id.endswith("/events")
            job = await asyncio.to_thread(self.jobs.get, job_id.removesuffix("/events"), user=user)
            if job is None:
                raise RequestError(404, "no such job", "job_not_found")
            if method == "DELETE":
                await asyncio.to_thread(self.jobs.client.cancel_workflow, job.id)
                await send_json(send, 200, {"id": job.id, "object": "job", "cancelled": True})
            elif events:
                await self._events(job, send)
            else:
                await send_json(send, 200, public_status(await asyncio.to_thread(job.status)))
        except RequestError as e:
            await send_error(send, e)

    async def _submit(self, scope: dict, receive: Any, send: Any, user: str) -> None:
        svc = self.service
        headers = dict(scope["headers"])
        body = await svc.read_json_body(headers, receive)
        if body is None:
            return
        await asyncio.to_thread(self._check_quota, user)
        try:
            raw = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise RequestError(400, f"the request body is not valid JSON: {e}", "invalid_json") from None
        if not isinstance(raw, dict):
            raise RequestError(400, "the request body must be a JSON object", "invalid_request")
        allowed = (*sorted(svc.policy.names), *(str(n) for n in svc.policy.networks))
        policy = {"public_only": True, "allow_hosts": allowed, "shared": True}  # the server's rules go with the job
        job_id = new_job_id()
        if "flow" in raw:
            spec = await asyncio.to_thread(self._flow_spec, raw, user, job_id, policy)
        else:
            spec = await self._turn_spec(raw, body, user, job_id, policy)
        job = await asyncio.to_thread(self.jobs.submit, spec, job_id=job_id)
        await send_json(send, 202, {"id": job.id, "object": "job", "state": "queued", "kind": spec.kind,
                                    "session_id": spec.session_id, "flow_id": spec.flow_id})  # fmt: skip

    def _check_quota(self, user: str) -> None:
        going = self.jobs.client.list_workflows(user=user, status=["ENQUEUED", "PENDING"], load_input=False,
                                                load_output=False, limit=self.max_jobs)  # fmt: skip
        if len(going) >= self.max_jobs:
            raise RequestError(429, f"you have {self.max_jobs} jobs that did not end, the most this server allows",
                               "too_many_jobs")  # fmt: skip

    async def _turn_spec(self, raw: dict[str, Any], body: bytes, user: str, job_id: str,
                         policy: dict[str, Any]) -> JobSpec:  # fmt: skip
        svc = self.service
        name, agent = svc.agent_for(raw.get("model"))
        if "inputs" in raw:  # a crew, started on its inputs
            if not isinstance(agent, CrewAgent):
                raise RequestError(400, f"'inputs' are for a crew; {name!r} is not one", "invalid_inputs", "inputs")
            if not isinstance(raw["inputs"], dict):
                raise RequestError(400, "'inputs' must be a JSON object", "invalid_inputs", "inputs")
            try:
                start = agent.crew.start_messages(raw["inputs"])
            except ValueError as e:
                raise RequestError(400, str(e), "invalid_inputs", "inputs") from None
            raw = {k: v for k, v in raw.items() if k != "inputs"} | {"messages": start}
            body = orjson.dumps(raw)
        request = parse_request(body)
        if request.decision is not None and request.session_id in (None, NEW):
            raise RequestError(400, "a decision on paused calls names the job's session (session_id)",
                               "invalid_approval", "session_id")  # fmt: skip
        await svc.check_urls(request)
        named = request.session_id or NEW
        try:
            opened = await asyncio.to_thread(
                lambda: open_conversation(svc.session_store(), user, named, request, len(body), svc.quotas)
            )
        except ValueError as e:
            raise RequestError(400, str(e), "invalid_session_id", "session_id") from None
        except SessionError as e:
            raise RequestError(503, "the session store is unavailable (the server's log says why)",
                               "session_store_unavailable") from e  # fmt: skip
        messages = [] if request.resume else [m.model_dump() for m in opened.messages]
        return JobSpec("turn", name, user, opened.session.id, messages, request.resume, **policy)

    def _flow_spec(self, raw: dict[str, Any], user: str, job_id: str, policy: dict[str, Any]) -> JobSpec:
        name = raw["flow"]
        if not isinstance(name, str) or name not in self.flows:
            known = ", ".join(sorted(self.flows)) or "none"
            raise RequestError(404, f"no flow {name!r} (this server runs {known})", "flow_not_found", "flow")
        inputs, feedback, flow_id = raw.get("inputs") or {}, raw.get("feedback"), raw.get("flow_id")
        if not isinstance(inputs, dict) or (feedback is not None and not isinstance(feedback, str)):
            raise RequestError(400, "'inputs' is a JSON object, 'feedback' a text", "invalid_flow")
        if "id" in inputs:
            raise RequestError(400, "a flow's id is the server's: send flow_id to go on with one", "invalid_flow")
        mine = flow_id is None or (isinstance(flow_id, str) and self.jobs.get(flow_id, user=user) is not None)
        if not mine:  # a flow goes on only for the principal whose job started it (its id is that job's)
            raise RequestError(404, "no such flow", "flow_not_found", "flow_id")
        answering = None
        if feedback is not None:  # for the question the flow waits on now, which the job carries
            found = FlowStates(self.jobs.store).load(flow_id) if flow_id is not None else None
            answering = waiting_for(found[2]) if found is not None and found[1] == PAUSED else None
            if answering is None:
                raise RequestError(409, "the flow waits for no feedback now (see its job's state)", "flow_not_waiting",
                                   "feedback")  # fmt: skip
        return JobSpec("flow", name, user, flow_id=flow_id or job_id, inputs=inputs, feedback=feedback,
                       answering=answering, **policy)  # fmt: skip

    async def _events(self, job: Job, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        sent = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stream_timeout
        while True:
            status = await asyncio.to_thread(job.status)
            for m in status.messages[sent:]:
                await send({"type": "http.response.body", "body": _event({"message": public_message(m)}),
                            "more_body": True})  # fmt: skip
            sent = max(sent, len(status.messages))
            if status.ended or loop.time() > deadline:
                tail = _event({"status": public_status(status)}) + b"data: [DONE]\n\n"
                await send({"type": "http.response.body", "body": tail, "more_body": False})
                return
            await asyncio.sleep(_POLL_S)


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def public_message(m: dict[str, Any]) -> dict[str, Any]:
    """What a client is shown of a stored message: role, name, text, a call's name and arguments, public extras."""
    msg = to_messages([m])[0]
    out: dict[str, Any] = {"role": msg.role, "content": msg.text}
    if msg.name:
        out["name"] = msg.name
    if msg.function_call is not None:
        out["function_call"] = {"name": msg.function_call.name, "arguments": msg.function_call.arguments}
    extra = {k: v for k, v in (msg.extra or {}).items() if k in PUBLIC_EXTRAS}
    if extra:
        out["chatagent"] = extra
    return out


def public_status(status: JobStatus) -> dict[str, Any]:
    """A job's status as its owner reads it (an error says what kind it was: the server's log has the rest)."""
    out: dict[str, Any] = {"id": status.id, "object": "job", "kind": status.kind, "state": status.state,
                           "session_id": status.session_id, "flow_id": status.flow_id,
                           "messages": [public_message(m) for m in status.messages]}  # fmt: skip
    if status.waiting:
        out["waiting"] = [{"id": w.get("id"), "name": w.get("name"), "arguments": w.get("arguments")}
                          for w in status.waiting]  # fmt: skip
    if status.question is not None:
        out["question"] = status.question
    if status.output is not None:
        out["output"] = status.output
    if status.error is not None:
        out["error"] = {"type": status.error.get("type"), "message": "the job failed (the server's log says why)"}
    return out


__all__ = ["JobsEndpoint", "public_message", "public_status"]
