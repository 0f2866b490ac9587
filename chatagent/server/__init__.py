"""`chatagent serve`: agents behind the OpenAI API, as an ASGI app (`asgi_app`) or a server (`AgentServer`).

`runner` (the server's lifecycle) < `app` (ASGI handling) < `conversations` (sessions per principal), `approvals` (paused
calls from the server's record), `identity` (principals from API keys), `connections` (bounds) < `openai_api` (the wire
format). docs/security.md is the threat model.
"""

from chatagent.server.runner import DEFAULT_MAX_REQUEST_BYTES, AgentServer, RequestError, asgi_app

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "AgentServer", "RequestError", "asgi_app"]
