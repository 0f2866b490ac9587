"""The two A2A wire formats `serve --a2a` speaks on one endpoint: protocol 1.0 and 0.3, told apart by method name.

A 1.0 client calls `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask` with protobuf-JSON params; a 0.3
client (a2a-sdk 0.3, still what most partners run) calls `message/send`, `message/stream`, `tasks/get`,
`tasks/cancel` with parts that carry a `kind`. The endpoint works on 1.0's types; a `Wire` reads a request's params
into them and writes a task or a stream event back in the client's format (0.3 through a2a-sdk's own conversions,
`a2a.compat.v0_3`). The agent card lists both interfaces and carries 0.3's top-level fields beside 1.0's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from chatagent.errors import ChatAgentError

Op = Literal["send", "stream", "get", "cancel"]


class BadParams(ChatAgentError):
    """A request's params that do not parse in its protocol's format."""


@dataclass(frozen=True)
class Wire:
    """One protocol version's method names and formats."""

    version: str
    methods: dict[str, Op]

    def message(self, params: Any) -> pb.Message:
        """The message a send request carries (BadParams if the params are not that request)."""
        if self.version == "1.0":
            try:
                return json_format.ParseDict(params, pb.SendMessageRequest(), ignore_unknown_fields=True).message
            except json_format.ParseError as e:
                raise BadParams(f"bad SendMessage params: {e}") from None
        try:
            sent = v03.MessageSendParams.model_validate(params)
        except pydantic.ValidationError as e:
            raise BadParams(f"bad message/send params: {_first_error(e)}") from None
        return conversions.to_core_message(sent.message)

    def task_id(self, params: Any) -> str | None:
        """The task a get or cancel request names."""
        tid = params.get("id") if isinstance(params, dict) else None
        return tid if isinstance(tid, str) else None

    def task(self, task: pb.Task, *, sent: bool = False) -> dict[str, Any]:
        """`task` in this format (`sent`: as a send request's result, which 1.0 wraps in {"task": ...})."""
        if self.version == "1.0":
            out = json_format.MessageToDict(task)
            return {"task": out} if sent else out
        return _dump(conversions.to_compat_task(task))

    def event(self, event: pb.StreamResponse) -> dict[str, Any]:
        """One stream event (a task, a status or an artifact update) in this format."""
        if self.version == "1.0":
            return json_format.MessageToDict(event)
        return _dump(conversions.to_compat_stream_response(event).result)


CURRENT = Wire("1.0", {"SendMessage": "send", "SendStreamingMessage": "stream", "GetTask": "get",
                       "CancelTask": "cancel"})  # fmt: skip
LEGACY = Wire("0.3", {"message/send": "send", "message/stream": "stream", "tasks/get": "get",
                      "tasks/cancel": "cancel"})  # fmt: skip
_BY_METHOD = {name: wire for wire in (CURRENT, LEGACY) for name in wire.methods}


def wire_of(method: str) -> Wire | None:
    """The wire whose method `method` is, None for a method neither has."""
    return _BY_METHOD.get(method)


def card_json(card: pb.AgentCard, url: str) -> dict[str, Any]:
    """`card` as clients of both versions read it: 1.0's `supportedInterfaces` (a JSON-RPC interface per version at
    `url`) and 0.3's `url`, `protocolVersion`, `preferredTransport`, `securitySchemes` beside them."""
    del card.supported_interfaces[:]
    for version in (CURRENT.version, LEGACY.version):
        card.supported_interfaces.append(pb.AgentInterface(url=url, protocol_binding="JSONRPC",
                                                           protocol_version=version))  # fmt: skip
    return agent_card_to_dict(card)


def _dump(model: pydantic.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _first_error(e: pydantic.ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "params"
    return f"{where}: {err.get('msg', 'invalid')}"[:200]


__all__ = ["CURRENT", "LEGACY", "BadParams", "Wire", "card_json", "wire_of"]
