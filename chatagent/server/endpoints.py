"""The small JSON endpoints of `chatagent serve` beside the chat completions: `DELETE /v1/sessions/{id}` (a
principal deletes one of its conversations), `GET /v1/traces[/{id}]` (its own recorded traces), `GET
/v1/models[/{id}]`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from chatagent.run.trace_export import exported, otlp
from chatagent.run.trace_writer import trace_store
from chatagent.server.app import Service, send_error, send_json
from chatagent.server.conversations import STORED
from chatagent.server.openai_api import RequestError
from chatagent.sessions import Session, SessionError

logger = logging.getLogger("chatagent.server")


class SessionsEndpoint:
    """`DELETE /v1/sessions/{id}`: a principal deletes one of its conversations (404 for any other id)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        try:
            user = svc.user_of(dict(scope["headers"]))
            named = scope.get("path_params", {}).get("session_id", "")
            deleted = await asyncio.to_thread(_delete, svc, user, named)
            if not deleted:
                raise RequestError(404, "no such conversation", "session_not_found", "session_id")
            await send_json(send, 200, {"id": named, "object": "session", "deleted": True})
        except RequestError as e:
            await send_error(send, e)


def _delete(svc: Service, user: str, named: str) -> bool:
    try:
        deleted = Session(named, svc.session_store(), user=user).delete()
        STORED.forget(user)  # its conversations' bytes are summed anew
        return deleted
    except ValueError:
        return False
    except SessionError as e:
        logger.error("deleting a session failed: %s", e)
        raise RequestError(503, "the session store is unavailable (the server's log says why)",
                           "session_store_unavailable") from None  # fmt: skip


class TracesEndpoint:
    """`GET /v1/traces` and `GET /v1/traces/{id}`: a principal's own recorded traces (`asgi_app(traces=...)`)."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        try:
            user = svc.user_of(dict(scope["headers"]))
            if svc.recorder is None:
                raise RequestError(404, "this server records no traces (serve --traces)", "traces_not_recorded")
            query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
            trace_id = scope.get("path_params", {}).get("trace_id")
            found = await asyncio.to_thread(_traces, svc, user, trace_id, query)
            if found is None:
                raise RequestError(404, "no such trace", "trace_not_found", "trace_id")
            await send_json(send, 200, found)
        except RequestError as e:
            await send_error(send, e)


def _traces(svc: Service, user: str, trace_id: str | None, query: dict[str, str]) -> dict[str, Any] | None:
    store = trace_store(svc.trace_store)
    try:
        if trace_id is None:
            limit = min(max(int(query.get("limit", "30")), 1), 500)
            found = store.list(user, name=query.get("name"), status=query.get("status"), limit=limit)
            return {"object": "list", "data": [{k: getattr(t, k) for k in t.__slots__ if k != "owner"} for t in found]}
        body = store.get(user, trace_id)
    except ValueError:
        raise RequestError(400, "limit must be a number", "invalid_limit", "limit") from None
    except SessionError as e:
        logger.error("reading traces failed: %s", e)
        raise RequestError(503, "the trace store is unavailable (the server's log says why)",
                           "trace_store_unavailable") from None  # fmt: skip
    if body is None:
        return None
    return otlp(body) if query.get("format") == "otlp" else exported(body)


class ModelsEndpoint:
    """`GET /v1/models` and `GET /v1/models/{id}`."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def card(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": self.service.created, "owned_by": "chatagent"}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        svc = self.service
        try:
            svc.user_of(dict(scope["headers"]))
            model = scope.get("path_params", {}).get("model")
            if model is None:
                await send_json(send, 200, {"object": "list", "data": [self.card(n) for n in svc.agents]})
            else:
                await send_json(send, 200, self.card(svc.agent_for(model)[0]))
        except RequestError as e:
            await send_error(send, e)


__all__ = ["ModelsEndpoint", "SessionsEndpoint", "TracesEndpoint"]
