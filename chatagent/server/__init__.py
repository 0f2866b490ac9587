"""`chatagent serve`: agents behind the OpenAI API, as an ASGI app (`asgi_app`) or a server (`AgentServer`).

`runner` (the server's lifecycle) < `app` (ASGI handling) < `openai_api` (the wire format).
"""

from chatagent.server.runner import DEFAULT_MAX_REQUEST_BYTES, AgentServer, RequestError, asgi_app

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "AgentServer", "RequestError", "asgi_app"]
