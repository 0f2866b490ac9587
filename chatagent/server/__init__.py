"""`chatagent serve`: agents behind the OpenAI API (and MCP, A2A), as an ASGI app (`asgi_app`) or a server
(`AgentServer`); `serve_mcp_stdio` for MCP over stdio.

`runner` (the server's lifecycle) < `mcp_server`, `a2a_server` (the MCP and A2A surfaces) < `app` (ASGI handling of the
OpenAI API) < `turns` (one turn, as every surface starts it) < `conversations` (sessions per principal), `approvals`
(paused calls from the server's record), `identity` (principals from API keys), `connections` (bounds) < `openai_api`
(the wire format). docs/security.md is the threat model.
"""

from chatagent.server.runner import DEFAULT_MAX_REQUEST_BYTES, AgentServer, RequestError, asgi_app, serve_mcp_stdio

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "AgentServer", "RequestError", "asgi_app", "serve_mcp_stdio"]
