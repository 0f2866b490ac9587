"""A stdio MCP server that behaves as one built on mcp 1.x does (the suite has no mcp 1.x to run one with):
`python mcp1_server.py`.

It speaks the older protocol only: a request it does not know, such as the newer client's `server/discover`,
is validated against the requests it knows, with pydantic, and what pydantic says is printed to stderr as
mcp 1.x prints it ("Failed to validate request: N validation errors for ClientRequest" and the errors), then
answered with -32602, as mcp 1.27 answers. Then `initialize` (echoing the client's protocol version),
`tools/list` (one tool, `add`) and `tools/call`, each logged as "Processing request of type ...".
"""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

from pydantic import BaseModel, RootModel, ValidationError


class Implementation(BaseModel):
    name: str
    version: str


class InitializeParams(BaseModel):
    protocolVersion: str  # noqa: N815 (the protocol's names)
    capabilities: dict[str, Any]
    clientInfo: Implementation  # noqa: N815


class PingRequest(BaseModel):
    method: Literal["ping"]
    params: dict[str, Any] | None = None


class InitializeRequest(BaseModel):
    method: Literal["initialize"]
    params: InitializeParams


class ListToolsRequest(BaseModel):
    method: Literal["tools/list"]
    params: dict[str, Any] | None = None


class CallToolParams(BaseModel):
    name: str
    arguments: dict[str, Any] | None = None


class CallToolRequest(BaseModel):
    method: Literal["tools/call"]
    params: CallToolParams


class SetLevelParams(BaseModel):
    level: str


class SetLevelRequest(BaseModel):
    method: Literal["logging/setLevel"]
    params: SetLevelParams


class ClientRequest(RootModel[PingRequest | InitializeRequest | ListToolsRequest | CallToolRequest | SetLevelRequest]):
    pass


ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(message: dict[str, Any]) -> dict[str, Any]:
    try:
        request = ClientRequest.model_validate({k: v for k, v in message.items() if k in ("method", "params")}).root
    except ValidationError as e:
        print(f"Failed to validate request: {e}", file=sys.stderr, flush=True)
        return {"error": {"code": -32602, "message": "Invalid request parameters", "data": ""}}
    print(f"Processing request of type {type(request).__name__}", file=sys.stderr, flush=True)
    if isinstance(request, InitializeRequest):
        return {
            "result": {
                "protocolVersion": request.params.protocolVersion,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "old", "version": "1.27.0"},
            }
        }
    if isinstance(request, ListToolsRequest):
        return {"result": {"tools": [ADD]}}
    if isinstance(request, CallToolRequest):
        args = request.params.arguments or {}
        return {"result": {"content": [{"type": "text", "text": str(args["a"] + args["b"])}], "isError": False}}
    return {"result": {}}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:  # a notification gets no answer
            send({"id": message["id"], **answer(message)})


if __name__ == "__main__":
    main()
