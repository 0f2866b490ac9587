"""The ASGI application behind `chatagent serve`: the OpenAI chat-completions API over one or more agents.

`chatagent.server.asgi_app(...)` builds it (see there for the options); this module holds the request handling:
the Host and Origin checked (`chatagent.utils.origins`) and JSON bodies only, the principal from the API key
(`identity`), bounded request bodies (chunked ones too) read within a time limit, the model chosen by name,
conversations owned by principals (`conversations`), paused tool calls resumed only from the server's own record
(`approvals`), remote clients' URLs kept off this machine's network (`chatagent.utils.url_fetch`), a bounded number
of runs at once, and each run streamed with `arun()`, closed when the client goes away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from chatagent.agent import Agent
from chatagent.run.traces import TraceRecorder
from chatagent.run.trust import acting_as
from chatagent.server.approvals import ApprovalTokens
from chatagent.server.conversations import Quotas
from chatagent.server.detached import SessionRuns
from chatagent.server.identity import ApiKeys, Principals
from chatagent.server.openai_api import (
    DONE,
    Answer,
    ChatRequest,
    Chunks,
    RequestError,
    checked_session_id,
    completion,
    error_event,
    media_urls,
    parse_request,
    usage_of,
)
from chatagent.server.turns import Reply, Where, reported, start_turn
from chatagent.sessions import open_store
from chatagent.utils.url_fetch import BlockedURLError, FetchError, URLPolicy, check_url

logger = logging.getLogger("chatagent.server")

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_CLOSE = (b"connection", b"close")


class Service:
    """What every request shares: the agents by model name, the limits, the keys, the session store."""

    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        api_key: ApiKeys,
        max_request_bytes: int,
        max_concurrency: int,
        deadline: float | None,
        store: str | None,
        allow_hosts: tuple[str, ...],
        body_timeout: float,
        approval_secret: str | bytes | None = None,
        quotas: Quotas = Quotas(),
        traces: bool | str = False,
    ) -> None:
        self.agents = dict(agents)
        self.default_model = next(iter(self.agents))
        self.principals = Principals(api_key)
        self.tokens = ApprovalTokens(approval_secret)
        self.quotas = quotas
        self.max_request_bytes = max_request_bytes
        self.max_concurrency = max_concurrency
        self.deadline = deadline
        self.body_timeout = body_timeout
        self.policy = URLPolicy.allowing(allow_hosts)
        self.store: Any = store
        if store is not None:  # a store named explicitly is opened now: a wrong URL fails at startup
            self.store = open_store(store)
        self.running = 0
        self.draining = False  # set on SIGTERM: /readyz says 503 so that a load balancer sends nothing new
        self.created = int(time.time())
        #: the served runs' traces go to the session store (`traces=True`) or the store `traces` names
        self.trace_store: str | None = store if traces is True else str(traces) if traces else None
        self.recorder = TraceRecorder(self.trace_store) if traces else None
        callbacks = (self.recorder,) if self.recorder is not None else ()
        self.where = Where(self.session_store, self.tokens, quotas, deadline, SessionRuns(self), self.policy, callbacks)

    # ---- checks ------------------------------------------------------------------------------------------------

    def user_of(self, headers: dict[bytes, bytes]) -> str:
        """The principal of a request (see `chatagent.server.identity`); RequestError 401 when a key is required
        and the request does not carry one."""
        return self.principals.of(headers)

    def session_store(self) -> Any:
        """The session store (the default one opened on first use; blocking)."""
        if self.store is None:
            self.store = open_store(None)
        return self.store

    def agent_for(self, model: str | None) -> tuple[str, Agent]:
        """The agent a request names (the first one when it names none); RequestError 404 for an unknown name."""
        name = self.default_model if model is None else model
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(repr(n) for n in self.agents)
            raise RequestError(404, f"the model {name!r} does not exist (this server has {known})", "model_not_found",
                               "model")  # fmt: skip
        return name, agent

    async def read_json_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
        """`read_body` of a request that must say it is JSON: RequestError 415 for any other Content-Type (a web
        page's form or text/plain POST is not an API client's)."""
        if headers.get(b"content-type", b"").partition(b";")[0].strip().lower() != b"application/json":
            raise RequestError(415, "the request body must be JSON (Content-Type: application/json)",
                               "unsupported_media_type")  # fmt: skip
        return await self.read_body(headers, receive)

    async def read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
        """The request body (None if the client left); RequestError 413 when larger than allowed, 408 when it does
        not arrive within `body_timeout`."""
        limit = self.max_request_bytes
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise _too_large(limit) if declared.isdigit() else RequestError(400, "bad Content-Length", "bad_length")

        async def read() -> bytes | None:
            parts: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                part = message.get("body", b"")
                size += len(part)
                if size > limit:
                    raise _too_large(limit)
                parts.append(part)
                if not message.get("more_body", False):
                    return b"".join(parts)

        try:
            return await asyncio.wait_for(read(), self.body_timeout)
        except asyncio.TimeoutError:
            raise RequestError(408, f"the request body did not arrive within {self.body_timeout:g} s",
                               "request_timeout") from None  # fmt: skip

    async def check_urls(self, request: ChatRequest) -> None:
        """RequestError 400 for a media item naming a local path or a URL on this machine or a private network."""
        for i, j, url in media_urls(request.messages):
            try:
                await asyncio.to_thread(check_url, url, self.policy)  # resolving a name may block
            except BlockedURLError as e:
                raise RequestError(400, f"messages[{i}].content[{j}]: {e}", "url_not_allowed", "messages") from None
            except FetchError:
                pass  # not resolvable now: the agent says so when it tries


def _too_large(limit: int) -> RequestError:
    return RequestError(413, f"the request is larger than {limit} bytes", "request_too_large")


# ---- responses -----------------------------------------------------------------------------------------------------


async def send_json(
    send: Send, status: int, payload: dict, *, close: bool = False, retry: bool = False,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:  # fmt: skip
    body = orjson.dumps(payload)
    headers = [_JSON, (b"content-length", b"%d" % len(body)), *(extra_headers or ())]
    if close:
        headers.append(_CLOSE)
    if retry:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, e: RequestError, *, close: bool = False) -> None:
    await send_json(send, e.status, e.body(), close=close, retry=e.status == 429)


class _Watch:
    """Cancels the request's task when the client disconnects, unless the response is already complete."""

    __slots__ = ("task", "finished", "gone", "_watcher")

    def __init__(self, receive: Receive) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("_Watch is made in the request's task")
        self.task = task
        self.finished = False
        self.gone = False
        self._watcher = asyncio.ensure_future(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self.finished:
            self.gone = True
            self.task.cancel()

    def stop(self) -> None:
        self.finished = True
        self._watcher.cancel()

    def absorb(self) -> None:
        """Called on CancelledError: swallow it when it is ours (the client left), else re-raise."""
        if not self.gone:
            raise asyncio.CancelledError
        uncancel = getattr(self.task, "uncancel", None)
        if uncancel is not None:
            uncancel()


class ChatCompletions:
    """`POST /v1/chat/completions` as a plain ASGI app (its streaming path writes each event once, as prepared
    bytes)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        svc = self.service
        headers = dict(scope["headers"])
        body_read = False
        try:
            user = svc.user_of(headers)
            body = await svc.read_json_body(headers, receive)
            if body is None:
                return  # the client left
            body_read = True
            request = parse_request(body)
            model, agent = svc.agent_for(request.model)
            named = request.session_id
            if named is None and b"x-session-id" in headers:
                named = checked_session_id(headers[b"x-session-id"].decode("latin-1"), "X-Session-Id")
            if request.resume and named is None:
                raise RequestError(400, "'resume' needs the session's id (session_id or X-Session-Id)",
                                   "invalid_resume", "session_id")  # fmt: skip
            await svc.check_urls(request)
            if svc.running >= svc.max_concurrency:
                raise RequestError(429, "the server is busy; retry shortly", "busy")
        except RequestError as e:
            await send_error(send, e, close=not body_read)  # a body left unread is never read as a request
            return
        svc.running += 1
        try:
            with acting_as(svc.where.trust(user)):
                await self._answer(agent, model, request, named, user, len(body), receive, send)
        finally:
            svc.running -= 1

    async def _answer(
        self, agent: Agent, model: str, request: ChatRequest, named: str | None, user: str, size: int,
        receive: Receive, send: Send,
    ) -> None:  # fmt: skip
        try:
            turn = await start_turn(self.service.where, agent, model, request, named, user, size)
        except RequestError as e:
            await send_error(send, e)
            return
        watch = _Watch(receive)
        try:
            if request.stream:
                await _stream(turn.run, model, request.include_usage, send, watch, turn.reply)
            else:
                await _whole(turn.run, model, send, watch, turn.reply)
        except asyncio.CancelledError:
            watch.absorb()
            if named is not None:
                logger.info("the client went away: the session's turn goes on, and is stored at its end")
            else:
                logger.info("the client went away: the agent's run was closed")
        finally:
            watch.stop()
            await turn.close(detach=named is not None and watch.gone)


async def _first(run: Any, send: Send) -> tuple[bool, list | None]:
    """(whether the run started, its first yield or None when it yielded nothing); a failure before the first yield
    is answered with its HTTP status."""
    try:
        return True, await run.__anext__()
    except StopAsyncIteration:
        return True, None
    except Exception as e:
        err = reported(e)
        await send_error(send, err)
        return False, None


async def _whole(run: Any, model: str, send: Send, watch: _Watch, reply: Reply) -> None:
    answer = Answer()
    try:
        async for fragments in run:
            answer.add(fragments)
    except Exception as e:
        watch.finished = True
        await send_error(send, reported(e))
        return
    watch.finished = True
    reply.finish(answer)
    text, reasoning = answer.final()  # only the final answer: a replaced message's earlier text is gone
    payload = completion(model, text, reasoning, answer, usage_of(run))
    await send_json(send, 200, payload, extra_headers=reply.headers())


async def _stream(run: Any, model: str, include_usage: bool, send: Send, watch: _Watch, reply: Reply) -> None:
    started, first = await _first(run, send)
    if not started:
        watch.finished = True
        return
    answer = Answer()
    chunks = Chunks(model)
    opening = chunks.role()
    if first:
        text, reasoning = answer.add(first)
        if text or reasoning:
            opening += chunks.delta(text, reasoning)
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + reply.headers()})
    await send({"type": "http.response.body", "body": opening, "more_body": True})
    try:
        async for fragments in run:
            text, reasoning = answer.add(fragments)
            if text or reasoning:
                await send({"type": "http.response.body", "body": chunks.delta(text, reasoning), "more_body": True})
        reply.finish(answer)
        tail = chunks.finish(answer) + (chunks.usage(usage_of(run)) if include_usage else b"") + DONE
    except Exception as e:
        tail = error_event(reported(e)) + DONE
    watch.finished = True
    await send({"type": "http.response.body", "body": tail, "more_body": False})


__all__ = ["ChatCompletions", "Service", "send_error", "send_json"]
