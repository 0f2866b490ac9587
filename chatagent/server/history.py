"""A served conversation's checkpoint history, and forks from it (`chatagent.sessions.history`), each principal's
own only (any other id is a 404):

    GET  /v1/sessions/{id}/history    {"object": "list", "data": [{"id": "1.3", "turn": 1, "step": 2,
                                       "kind": "tools", "messages": 3, "at": 1767225600.0}, ...]}
    POST /v1/sessions/{id}/fork       {"checkpoint": "1.3"} -> 201 {"id": <new conversation>, "object":
                                       "session", "forked_from": {"id": ..., "checkpoint": "1.3"}, "pending": bool}

The new conversation's id is made by the server (unguessable). Go on with it as with any other: a new message
(`session_id` and `messages`: a replay with a changed question), or, when `pending` (the checkpoint cut a turn),
`"resume": true` (the turn goes on from that step, on any replica).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from chatagent.server.app import Service, send_error, send_json
from chatagent.server.conversations import conversation_history, fork_conversation
from chatagent.server.openai_api import RequestError
from chatagent.sessions import SessionError

logger = logging.getLogger("chatagent.server")


class HistoryEndpoint:
    """`GET /v1/sessions/{id}/history` and `POST /v1/sessions/{id}/fork` (see the module docstring)."""

    def __init__(self, service: Service, fork: bool) -> None:
        self.service, self.fork = service, fork

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        svc = self.service
        headers = dict(scope["headers"])
        try:
            user = svc.user_of(headers)
            named = str(scope.get("path_params", {}).get("session_id", ""))
            if not self.fork:
                found = await asyncio.to_thread(_blocking, conversation_history, svc.session_store, user, named)
                data = [{k: getattr(c, k) for k in c.__slots__} for c in found]
                await send_json(send, 200, {"object": "list", "data": data})
                return
            body = await svc.read_json_body(headers, receive)
            if body is None:
                return  # the client left
            checkpoint = _checkpoint_of(body)
            branch = await asyncio.to_thread(_blocking, fork_conversation, svc.session_store, user, named,
                                             checkpoint, svc.quotas)  # fmt: skip
            pending = await asyncio.to_thread(lambda: branch.pending_turn is not None)
            await send_json(send, 201, {"id": branch.id, "object": "session", "pending": pending,
                                        "forked_from": {"id": named, "checkpoint": checkpoint}})  # fmt: skip
        except RequestError as e:
            await send_error(send, e)


def _checkpoint_of(body: bytes) -> str:
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    found = data.get("checkpoint") if isinstance(data, dict) else None
    if not isinstance(found, str) or set(data) - {"checkpoint"}:  # pyright: ignore[reportUnknownArgumentType]
        raise RequestError(400, 'the body is {"checkpoint": <an id from GET /v1/sessions/{id}/history>}',
                           "invalid_fork", "checkpoint")  # fmt: skip
    return found


def _blocking(fn: Any, store_of: Any, *args: Any) -> Any:
    """`fn(store, *args)` on the session store; RequestError 503 when the store fails (the log says why)."""
    try:
        return fn(store_of(), *args)
    except SessionError as e:
        logger.error("the session store failed: %s", e)
        raise RequestError(503, "the session store is unavailable (the server's log says why)",
                           "session_store_unavailable") from None  # fmt: skip


__all__ = ["HistoryEndpoint"]
