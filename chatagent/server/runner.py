"""An OpenAI-compatible HTTP server over any agent: `/v1/chat/completions` (streaming and not), `/v1/models`,
`/healthz`, on ASGI (Starlette; uvicorn runs it).

    from chatagent.server.runner import AgentServer, asgi_app
    AgentServer(agent, port=8000).serve_forever()     # or .start() in a background thread, then .close()
    app.mount("/assistant", asgi_app(agent))          # inside your own FastAPI / Starlette service

Any OpenAI client can then talk to the agent (`model` picks one of several agents; an unknown name is a 404). The
agent runs its tools itself, server-side: the client sees the assistant's text (and `reasoning_content`), and the
public parts of the final message's `extra` in the field `chatagent` (see `chatagent.server.openai_api`). Each API
key is its own principal (`identity`); with a session id (the body field `session_id` or the header
`X-Session-Id`; `"new"` for one the server makes) the conversation is kept in the session store, owned by that
principal (`conversations`), and the tools' state (a code sandbox) lives with it; without one, the tools' state
ends with the request. Paused tool calls resume only from the server's own record (`approvals`). Requests are
checked for their Host and Origin (`chatagent.utils.origins`) and must be JSON; connections are bounded in number
and in the time their headers may take (`connections`), request bodies in size and time, runs at once in number,
conversations in size and number per principal; a client that disconnects closes its run; URLs in messages may not
lead to this machine or its private networks unless allowed (`allow_hosts`). docs/security.md has the whole model.

`AgentServer.serve_forever()` handles SIGTERM and SIGINT itself, whatever handling the process inherited: it stops
accepting connections, lets the streams in flight finish for up to `grace` seconds (then closes them), and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from chatagent.agent import Agent
from chatagent.server.agui import AGUIEndpoint
from chatagent.server.app import ChatCompletions, Service, send_error
from chatagent.server.connections import bounded_protocol
from chatagent.server.conversations import (
    DEFAULT_MAX_PRINCIPAL_BYTES,
    DEFAULT_MAX_SESSION_BYTES,
    DEFAULT_MAX_SESSIONS,
    Quotas,
)
from chatagent.server.endpoints import ModelsEndpoint, SessionsEndpoint, TracesEndpoint
from chatagent.server.health import Health, Ready, stop_on_signals
from chatagent.server.history import HistoryEndpoint
from chatagent.server.identity import ApiKeys
from chatagent.server.jobs import JobsEndpoint
from chatagent.server.mcp_sessions import DEFAULT_PER_PRINCIPAL, DEFAULT_UNUSED_TIMEOUT, SessionQuota
from chatagent.server.openai_api import RequestError
from chatagent.utils.origins import HostCheck

logger = logging.getLogger("chatagent.server")

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_CONCURRENCY = 256
DEFAULT_GRACE = 30.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_DRAIN_DELAY = 0.0
_UNGUARDED = ("/healthz", "/health", "/readyz")


def asgi_app(
    agent_or_agents: Agent | Iterable[Agent] | Mapping[str, Agent],
    *,
    api_key: ApiKeys = None,
    model_name: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deadline: float | None = None,
    store: str | None = None,
    allow_hosts: Iterable[str] = (),
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    server_names: Iterable[str] = (),
    bound_address: str = "0.0.0.0",
    approval_secret: str | bytes | None = None,
    max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    max_principal_bytes: int = DEFAULT_MAX_PRINCIPAL_BYTES,
    mcp: bool = False,
    expose_tools: bool | Iterable[str] = False,
    mcp_sessions: int = DEFAULT_PER_PRINCIPAL,
    mcp_unused_timeout: float = DEFAULT_UNUSED_TIMEOUT,
    a2a: bool = False,
    jobs: bool = False,
    job_flows: Iterable[str] = (),
    dbos_schema: str = "dbos",
    traces: bool | str = False,
    ag_ui: bool = False,
) -> Any:
    """The ASGI app (a Starlette application) serving the agents with the OpenAI chat completions API (and MCP).

    Args:
        agent_or_agents: an Agent, a list of Agents (each named: the name is its model id), or a dict of model id
            -> Agent. One object serves every request (agents keep no state between runs).
        api_key: a key, a list of keys or a dict of client name -> key: requests must then send `Authorization:
            Bearer <key>` (compared in constant time), and each key is its own principal (its conversations are
            its own).
        model_name: the model id of a single agent (default: its name, else 'chatagent').
        max_request_bytes: larger request bodies get 413.
        max_concurrency: runs at once; more get 429.
        deadline: seconds one run may take (None: no limit).
        store: the session store's URL for conversations named by a session id (default:
            $CHATAGENT_SESSION_STORE, else the workspace's SQLite file, opened on first use).
        allow_hosts: hosts that URLs in clients' messages may lead to although they are on this machine or a
            private network: names, addresses or networks (`docs.internal`, `10.0.0.5`, `10.0.0.0/8`).
        body_timeout: seconds a client may take to send its request body (else 408).
        server_names: names clients reach the server by besides loopback names and `bound_address` (the `Host`
            they send; `"*"`: any); other Hosts get 421, requests from other web sites (`Origin`) 403.
        bound_address: the address the server listens on (`AgentServer` sets it; '0.0.0.0': any IP address).
        approval_secret: the key that signs paused tool calls for clients without a session (default: random per
            process; replicas behind one address need the same one).
        max_session_bytes: how large one stored conversation may grow, its files included (then 413).
        max_sessions: how many conversations one principal may keep (then 429).
        max_principal_bytes: how much one principal's conversations may take in all (then 413).
        mcp: also serve the agents over MCP's streamable HTTP transport at `/mcp`, each as a tool `ask_<name>`,
            under the same keys, conversations and approval rules (see `chatagent.server.mcp_server`; needs the
            `mcp` package).
        expose_tools: with `mcp`, the agents' own tools are MCP tools too (but those that need approval), each call
            through its agent's input and output checks; a list of agent names exposes only theirs, and is how an
            agent whose checks a direct call cannot reach (an `after_model` hook) is exposed at all.
        mcp_sessions: MCP sessions one principal may hold open (then 429; without keys, per client address).
        mcp_unused_timeout: seconds an MCP session may stay open without listing or calling a tool.
        a2a: also serve the agents over A2A: agent cards (`/.well-known/agent-card.json`) and tasks at
            `/a2a/<name>`, under the same rules (see `chatagent.server.a2a_server`; needs `a2a-sdk`).
        jobs: also take background jobs at `/v1/jobs` (turns, crews, and the flows named in `job_flows`), run by
            DBOS workers on the same PostgreSQL store (see `chatagent.server.jobs`; needs `chatagent[dbos]` and
            a `postgresql://` store; `dbos_schema` is where the workers keep DBOS's tables).
        traces: record every served run as a trace owned by its principal, into the session store (True) or the
            store this URL names, and serve each principal its own: `GET /v1/traces` (newest first: `?limit=`,
            `?status=`, `?name=`), `GET /v1/traces/{id}` (`?format=otlp` for OpenTelemetry's JSON), paths and keys
            left out (`chatagent.run.trace_export`); another principal's trace is a 404. Needs `api_key`: without
            keys every client is one principal.
        ag_ui: also serve each agent over AG-UI at `POST /ag-ui/<name>` (a RunAgentInput in, its events out as
            SSE; see `chatagent.server.agui`; needs `api_key`: each client's threads are its own).

    `/healthz` says the process is alive; `/readyz` whether it takes requests (503 while it drains on SIGTERM,
    or when its session store does not answer): what a load balancer checks.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    service = Service(
        _by_model(agent_or_agents, model_name),
        api_key=api_key,
        max_request_bytes=max_request_bytes,
        max_concurrency=max_concurrency,
        deadline=deadline,
        store=store,
        allow_hosts=tuple(allow_hosts),
        body_timeout=body_timeout,
        approval_secret=approval_secret,
        quotas=Quotas(max_session_bytes, max_sessions, max_principal_bytes),
        traces=traces,
    )
    if traces and not service.principals.required:
        raise ValueError("traces=True serves each API client its own traces: it needs api_key (one per client)")
    routes = [
        Route("/healthz", Health(), methods=["GET"]),
        Route("/health", Health(), methods=["GET"]),
        Route("/readyz", Ready(service), methods=["GET"]),
        Route("/v1/models", ModelsEndpoint(service), methods=["GET"]),
        Route("/v1/models/{model:path}", ModelsEndpoint(service), methods=["GET"]),
        Route("/v1/chat/completions", ChatCompletions(service), methods=["POST"]),
        Route("/v1/sessions/{session_id}/history", HistoryEndpoint(service, fork=False), methods=["GET"]),
        Route("/v1/sessions/{session_id}/fork", HistoryEndpoint(service, fork=True), methods=["POST"]),
        Route("/v1/sessions/{session_id:path}", SessionsEndpoint(service), methods=["DELETE"]),
        Route("/v1/traces", TracesEndpoint(service), methods=["GET"]),
        Route("/v1/traces/{trace_id:path}", TracesEndpoint(service), methods=["GET"]),
    ]
    if mcp:
        from chatagent.server.mcp_server import MCPEndpoint, MCPSurface  # the mcp package: only when asked for

        quota = SessionQuota(mcp_sessions, mcp_unused_timeout)
        routes.append(Route("/mcp", MCPEndpoint(MCPSurface(service, expose_tools=expose_tools), quota),
                            methods=["GET", "POST", "DELETE"]))  # fmt: skip
    elif expose_tools:
        raise ValueError("expose_tools is for the MCP server: give mcp=True too")
    if jobs:
        url = store or os.environ.get("CHATAGENT_SESSION_STORE") or ""
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("jobs need a postgresql:// session store (store=, or $CHATAGENT_SESSION_STORE)")
        endpoint = JobsEndpoint(service, url, flows=tuple(job_flows), dbos_schema=dbos_schema)
        routes += [Route("/v1/jobs", endpoint, methods=["POST", "GET"]),
                   Route("/v1/jobs/{job_id:path}", endpoint, methods=["GET", "DELETE"])]  # fmt: skip
    elif tuple(job_flows):
        raise ValueError("job_flows are for the jobs endpoint: give jobs=True too")
    if ag_ui:
        if not service.principals.required:
            raise ValueError("ag_ui=True keeps each client's threads: it needs api_key (one per client)")
        routes.append(Route("/ag-ui/{name:path}", AGUIEndpoint(service), methods=["POST"]))
    if a2a:
        from chatagent.server.a2a_server import CARD_PATH, A2AEndpoint  # a2a-sdk: only when asked for

        endpoint = A2AEndpoint(service)
        routes += [Route(CARD_PATH, endpoint, methods=["GET"]),
                   Route("/a2a/{name:path}", endpoint, methods=["GET", "POST"])]  # fmt: skip

    async def not_found(request: Any, exc: Exception) -> Any:
        from starlette.responses import JSONResponse

        status = getattr(exc, "status_code", 404)
        path = request.url.path
        what = f"no route {request.method} {path!r}" + (" (POST /v1/chat/completions)" if status == 405 else "")
        return JSONResponse(RequestError(status, what, "not_found").body(), status)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.state.chatagent = service
    return _Guarded(app, HostCheck(bound_address, server_names))


def serve_mcp_stdio(
    agent_or_agents: Agent | Iterable[Agent] | Mapping[str, Agent],
    *,
    expose_tools: bool | Iterable[str] = False,
    store: str | None = None,
    deadline: float | None = None,
    allow_hosts: Iterable[str] = (),
) -> None:
    """Serve the agents over MCP on this process's stdin and stdout (`chatagent mcp`: for desktop and IDE clients
    that start the server themselves) until the client closes them. The client is the local user who started it,
    a principal of its own (`mcp:local`); see `chatagent.server.mcp_server`."""
    from chatagent.server.mcp_server import serve_stdio  # the mcp package: only when asked for

    service = Service(
        _by_model(agent_or_agents, None), api_key=None, max_request_bytes=DEFAULT_MAX_REQUEST_BYTES,
        max_concurrency=DEFAULT_MAX_CONCURRENCY, deadline=deadline, store=store, allow_hosts=tuple(allow_hosts),
        body_timeout=DEFAULT_BODY_TIMEOUT,
    )  # fmt: skip
    asyncio.run(serve_stdio(service, expose_tools=expose_tools))


class _Guarded:
    """The app behind the Host and Origin checks (`chatagent.utils.origins`); health checks pass unchecked."""

    def __init__(self, app: Any, check: HostCheck) -> None:
        self.app, self.check = app, check
        self.state = app.state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in _UNGUARDED:
            headers = dict(scope["headers"])
            host, origin = headers.get(b"host"), headers.get(b"origin")
            refused = self.check.refusal(
                host.decode("latin-1") if host is not None else None,
                origin.decode("latin-1") if origin is not None else None,
            )
            if refused is not None:
                await send_error(send, RequestError(refused[0], refused[1], "host_not_allowed"), close=True)
                return
        await self.app(scope, receive, send)


def _by_model(agents: Any, model_name: str | None) -> dict[str, Agent]:
    if isinstance(agents, Agent):
        return {model_name or agents.name or "chatagent": agents}
    if model_name is not None:
        raise TypeError("model_name is for a single agent: name several agents with a dict of model id -> agent")
    if isinstance(agents, Mapping):
        pairs = list(agents.items())
    elif isinstance(agents, Iterable) and not isinstance(agents, (str, bytes)):
        pairs = []
        for a in agents:
            if isinstance(a, Agent) and not a.name:
                raise ValueError("each of several agents needs a name (its model id), or pass a dict of id -> agent")
            pairs.append((getattr(a, "name", None), a))
    else:
        raise TypeError(f"serve needs an Agent, a list of Agents or a dict of them, got {type(agents).__name__}")
    out: dict[str, Agent] = {}
    for name, agent in pairs:
        if not isinstance(agent, Agent):
            raise TypeError(f"serve needs Agents, got {type(agent).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a model id must be a non-empty string, got {name!r}")
        if name in out:
            raise ValueError(f"two agents are named {name!r}: model ids must differ")
        out[name] = agent
    if not out:
        raise ValueError("serve needs at least one agent")
    return out


# ---- running it ------------------------------------------------------------------------------------------------------


class AgentServer:
    """Serve agents with the OpenAI chat completions API on `host:port` (uvicorn running `asgi_app`).

    Takes `asgi_app`'s arguments, and `grace`: seconds the streams in flight (and the session turns that outlived
    their clients) may take to finish when the server stops (SIGTERM, SIGINT or `close()`) before they are closed;
    `drain_delay`: seconds between the signal and the stop, while `/readyz` says 503 and requests are still taken
    (so that a load balancer's health checks see it go before its connections are refused); `max_connections`: connections open at once
    (more are answered 503 and closed); `header_timeout`: seconds a client may take to send a request's headers
    (then its connection is closed). Port 0 picks a free port (see `url`).
    """

    def __init__(
        self,
        agent_or_agents: Agent | Iterable[Agent] | Mapping[str, Agent],
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        grace: float = DEFAULT_GRACE,
        drain_delay: float = DEFAULT_DRAIN_DELAY,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **options: Any,
    ) -> None:
        self.protocol = bounded_protocol(max_connections, header_timeout)
        self.app = asgi_app(agent_or_agents, bound_address=host, **options)
        self.service: Service = self.app.state.chatagent
        self.model_name = self.service.default_model
        self.grace = grace
        self.drain_delay = drain_delay
        self.socket = _listen(host, port)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """The base URL for OpenAI clients (ends in /v1)."""
        host, port = self.socket.getsockname()[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    @property
    def a2a_url(self) -> str:
        """The base URL of the A2A agent (its card at `/.well-known/agent-card.json`; served with `a2a=True`)."""
        return self.url[: -len("/v1")]

    @property
    def mcp_url(self) -> str:
        """The URL of the MCP endpoint (served with `mcp=True`)."""
        return self.url[: -len("/v1")] + "/mcp"

    def _uvicorn(self) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # ours are installed by serve_forever
                yield

        config = uvicorn.Config(
            self.app, lifespan="off", log_config=None, access_log=False, http=self.protocol,
            timeout_graceful_shutdown=self.grace,  # pyright: ignore[reportArgumentType] -- uvicorn says int, waits a float
            timeout_keep_alive=30, backlog=4096,
        )  # fmt: skip
        return Server(config)

    async def _serve(self) -> None:
        try:
            await self._server.serve(sockets=[self.socket])
            await self._finish_runs()
        finally:
            self._stopped.set()

    async def _finish_runs(self) -> None:
        """Wait (within `grace`) for the session turns that outlived their clients; those cut off stay pending in
        the store, for a `"resume": true` on any replica."""
        going = [run.task for run in self.service.where.runs.going.values()]
        if going:
            logger.info("stopping: %d session turn(s) still running", len(going))
            await asyncio.wait(going, timeout=self.grace)

    def serve_forever(self) -> None:
        """Serve in this thread until SIGTERM or SIGINT (in the main thread) or `close()` from another thread; the
        streams in flight finish first (within `grace`)."""
        self._server = self._uvicorn()
        # debug: the chatagent command prints its own line, with the key, MCP and A2A (it said "serving" twice)
        logger.debug("serving %s (OpenAI-compatible) on %s", ", ".join(self.service.agents), self.url)
        with stop_on_signals(self._server, self.service, self.drain_delay):
            asyncio.run(self._serve())

    def start(self) -> AgentServer:
        """Serve in a background thread (once; calling it again does nothing)."""
        if self._thread is not None:
            return self
        self._server = self._uvicorn()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), name="chatagent-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: no new connections; the streams in flight finish (within `grace`); then return."""
        if self._server is None:
            self.socket.close()
            return
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.grace + 10)
        self.socket.close()

    def __enter__(self) -> AgentServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket whose connections send small writes at once: asyncio turns Nagle's algorithm off only
    on sockets of protocol IPPROTO_TCP (an SSE event or a small response then waits for no delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except BaseException:
        sock.close()
        raise
    return sock


__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "AgentServer", "RequestError", "asgi_app", "serve_mcp_stdio"]
