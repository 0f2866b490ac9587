"""MCP servers as tools: every tool of every configured server becomes a chatagent tool named `server-tool`.

    bot = FnCallAgent(llm=cfg, function_list=[{'mcpServers': {
        'files': {'command': 'python', 'args': ['server.py'], 'env': {...}, 'cwd': '...'},   # stdio
        'remote': {'url': 'http://127.0.0.1:8765/mcp', 'headers': {...}},                   # streamable HTTP
        'legacy': {'url': 'http://127.0.0.1:8766/sse', 'type': 'sse'},                      # SSE
    }}])
    ...
    bot.close()   # ends the stdio servers and everything they started (they also end when the agent's process does)

A `url` server speaks streamable HTTP, or SSE (the older HTTP transport, Qwen-Agent's default) when its config
says `'type': 'sse'` or its URL ends in `/sse`; a server that refuses streamable HTTP is tried with SSE. A server's
resources and prompts become four more tools (`<server>-list_resources`, `-read_resource`, `-list_prompts`,
`-get_prompt`; see `chatagent.tools.mcp_content`), and `MCPConnection` reads them from code.

Each server gets a session, opened when the agent is built (its tools are listed then) and reused by every
call; a session that broke (the server died or restarted, the connection dropped) is reopened by the next call. Every
call has a timeout (`timeout` in the server's config, default 30 s; `connect_timeout` for opening, default
30 s). A tool error, a timeout or a dead server comes back as a function message the model can read, never
as a hang. A stdio server runs under a reaper (`chatagent/tools/_reaper.py`): every process it starts, even one
that detaches, is ended with it, and it is ended when the agent's process ends, however that ends. Text, image,
audio and resource contents become content items. Needs the `mcp` package (>= 2):
``pip install 'chatagent[mcp]'``.

A session lives on the event loop that uses it: `run()` calls go through the process's background loop
(`chatagent.utils.aio`), and under `arun()` a tool is awaited on the caller's own loop, with a session opened there
(so a server's stdio process may be started once for each), its timeout cancelling the call.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import logging
import os
import shutil
import sys
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeGuard

from chatagent.errors import ChatAgentError
from chatagent.schema import ContentItem
from chatagent.tools.base import BaseTool
from chatagent.tools.mcp_content import result_to_content, server_tools
from chatagent.tools.mcp_stderr import ServerStderr
from chatagent.utils.aio import run_coroutine

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp import Client
    from mcp.client import Transport
    from mcp.types import (
        BlobResourceContents,
        CallToolResult,
        GetPromptResult,
        ListPromptsResult,
        Prompt,
        ReadResourceResult,
        Resource,
        ServerCapabilities,
        TextResourceContents,
        Tool,
    )

logger = logging.getLogger("chatagent.tools")

DEFAULT_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 30.0
_REAPER = str(Path(__file__).with_name("_reaper.py"))
_CONNECTIONS: weakref.WeakSet[MCPConnection] = weakref.WeakSet()


class MCPServerError(ChatAgentError, RuntimeError):
    """An MCP server could not be started or reached (the message names the server)."""


_CONNECTION_CLOSED, _REQUEST_TIMEOUT = -32000, -32001  # JSON-RPC codes the mcp client uses for these
_SSE, _HTTP, _HTTP_OR_SSE = "sse", "streamable-http", "http or sse"
_TYPES = {"sse": _SSE, "streamable-http": _HTTP, "streamable_http": _HTTP, "streamablehttp": _HTTP, "http": _HTTP}


# ---- one server ------------------------------------------------------------------------------------------------


class _Held:
    """A session with the server on one event loop: opened and kept open by one task there (as anyio requires)."""

    __slots__ = ("client", "holder", "closing", "open_lock")

    def __init__(self) -> None:
        self.client: Client | None = None
        self.holder: asyncio.Task[None] | None = None
        self.closing: asyncio.Event | None = None
        self.open_lock = asyncio.Lock()


class MCPConnection:
    """The sessions with one MCP server, one per event loop that uses it: opened on demand, reused, reopened after
    one broke. Synchronous calls use the process's background loop (`chatagent.utils.aio`); `acall` (what `arun()`
    awaits) uses the caller's running loop, so the session lives there and a timeout cancels the call."""

    def __init__(self, name: str, cfg: object) -> None:
        if not _is_json_object(cfg) or not (cfg.get("command") or cfg.get("url")):
            raise ValueError(
                f"MCP server {name!r}: its config needs 'command' (stdio) or 'url' (HTTP), got {cfg!r:.200}"
            )
        self.name = name
        self.cfg: dict[str, Any] = cfg
        given = cfg.get("type") or cfg.get("transport")
        if cfg.get("url") and given is not None and str(given).lower() not in _TYPES:
            raise ValueError(f"MCP server {name!r}: 'type' must be 'sse' or 'streamable-http', got {given!r:.60}")
        if not cfg.get("url"):
            self.kind = "stdio"
        elif given is not None:
            self.kind = _TYPES[str(given).lower()]
        else:
            self.kind = _SSE if str(cfg["url"]).rstrip("/").endswith("/sse") else _HTTP_OR_SSE
        self.capabilities: ServerCapabilities | None = None  # what the server offers, once a session opened
        self.timeout = float(cfg.get("timeout", DEFAULT_TIMEOUT))
        self.connect_timeout = float(cfg.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT))
        self._held: dict[asyncio.AbstractEventLoop, _Held] = {}
        self._lock = threading.Lock()
        _CONNECTIONS.add(self)

    def _server(self, kind: str, errlog: TextIO | None) -> Transport | str:
        """What `Client` connects to: the URL or HTTP transport (`kind`: SSE or streamable HTTP), or the stdio
        server's process writing its stderr to `errlog`."""
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        cfg = self.cfg
        if cfg.get("url"):
            url = cfg["url"]
            headers = cfg.get("headers")
            if kind == _SSE:
                from mcp.client.sse import sse_client

                return sse_client(url, headers=headers, timeout=self.connect_timeout, sse_read_timeout=max(
                    300.0, self.timeout))  # fmt: skip
            if not headers:
                return url
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
        command = str(cfg["command"])
        where = os.path.join(cfg.get("cwd") or ".", command) if "/" in command else None
        env: dict[str, Any] = cfg.get("env") or {}
        path = env.get("PATH") or os.environ.get("PATH")
        if not (os.access(where, os.X_OK) if where else shutil.which(command, path=path)):
            raise FileNotFoundError(f"the command {command!r} was not found (or is not executable)")
        # the server runs under a reaper: whatever it starts (even detached) ends with it, and it ends with us
        reaper = ["-I", "-S", _REAPER, "--parent", str(os.getpid()), "--grace", "1", "--", command]
        args = reaper + [str(a) for a in cfg.get("args", ())]
        params = StdioServerParameters(command=sys.executable, args=args, env=cfg.get("env"), cwd=cfg.get("cwd"))
        return stdio_client(params, errlog=errlog or sys.stderr)

    def _here(self) -> _Held:
        """This loop's session state (made on first use; entries of loops that have closed are dropped)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for gone in [lp for lp in self._held if lp.is_closed()]:
                del self._held[gone]
            held = self._held.get(loop)
            if held is None:
                held = self._held[loop] = _Held()
            return held

    async def _hold(self, held: _Held, ready: asyncio.Future[Client], kind: str) -> None:
        """Open the session and keep it open until asked to close."""
        from mcp import Client

        held.closing = asyncio.Event()
        stderr = None if self.cfg.get("url") else ServerStderr(self.name)  # an older server's handshake noise: 1 line
        try:
            server = self._server(kind, stderr.file if stderr else None)
            async with Client(server, read_timeout_seconds=self.timeout, mode="auto") as client:
                self.capabilities = client.server_capabilities
                held.client = client
                ready.set_result(client)
                await held.closing.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            elif not isinstance(e, asyncio.CancelledError):
                logger.warning("MCP server %r: the session ended: %s", self.name, _describe(e))
        finally:
            held.client = None
            if stderr is not None:
                stderr.close()

    async def _open(self) -> Client:
        held = self._here()
        async with held.open_lock:
            if held.client is not None and held.holder is not None and not held.holder.done():
                return held.client
            kinds = [_HTTP, _SSE] if self.kind == _HTTP_OR_SSE else [self.kind]
            for n, kind in enumerate(kinds, 1):
                ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
                held.holder = asyncio.get_running_loop().create_task(self._hold(held, ready, kind))
                try:
                    client = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
                except Exception as e:
                    await self._aclose_here()
                    if n == len(kinds):
                        raise
                    logger.info("MCP server %r: streamable HTTP failed (%s); trying SSE", self.name, _describe(e))
                    continue
                except BaseException:
                    await self._aclose_here()
                    raise
                if len(kinds) > 1:
                    self.kind = kind  # what worked is what the next sessions use
                return client
            raise AssertionError("unreachable")  # the last kind returned or raised

    async def _aclose_here(self) -> None:
        """End this loop's session (a stdio server's process ends with it)."""
        held = self._here()
        holder, held.holder = held.holder, None
        if holder is None:
            return
        if held.closing is not None:
            held.closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), 5)
        except BaseException:
            holder.cancel()
            try:
                await asyncio.wait_for(holder, 5)
            except BaseException:  # the transport's own cleanup failed: nothing more we can do
                logger.debug("MCP server %r did not close cleanly", self.name, exc_info=True)
        held.client = None

    async def alist_tools(self) -> list[Tool]:
        """The server's tools (connecting first, on the running loop). Raises MCPServerError."""
        try:
            client = await self._open()
            tools: list[Tool] = []
            cursor: str | None = None
            while True:
                page = await asyncio.wait_for(client.list_tools(cursor=cursor), self.timeout)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except Exception as e:
            await self._aclose_here()
            raise MCPServerError(f"MCP server {self.name!r} could not be started or listed: {_describe(e)}") from e

    async def acall(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call a tool on the running loop; the CallToolResult. Raises TimeoutError (the call is cancelled), or
        MCPServerError when the session broke (the next call opens a new one)."""
        return await self._arequest(lambda c: c.call_tool(tool, arguments, read_timeout_seconds=self.timeout))

    async def _arequest(self, ask: Callable[[Client], Awaitable[Any]]) -> Any:
        """`ask(client)` in this loop's session, within the timeout; TimeoutError or MCPServerError."""
        from mcp.shared.exceptions import MCPError

        try:
            client = await self._open()
            return await asyncio.wait_for(ask(client), self.timeout + 1.0)
        except asyncio.TimeoutError as e:  # before 3.11 not the built-in TimeoutError that callers catch
            if isinstance(e, TimeoutError):
                raise
            raise TimeoutError from e
        except MCPError as e:
            if e.code == _REQUEST_TIMEOUT:
                raise TimeoutError from e
            if e.code != _CONNECTION_CLOSED:  # a JSON-RPC error from a live server: the session is fine
                raise MCPServerError(f"the server answered with an error: {e}") from e
            await self._aclose_here()
            raise MCPServerError(f"the connection to MCP server {self.name!r} was closed") from e
        except Exception as e:
            await self._aclose_here()
            raise MCPServerError(f"the connection to MCP server {self.name!r} failed: {_describe(e)}") from e

    def list_tools(self) -> list[Tool]:
        """`alist_tools` for synchronous code (on the background loop)."""
        try:
            return run_coroutine(self.alist_tools(), self.connect_timeout + self.timeout + 1.0)
        except TimeoutError as e:
            self.close()
            raise MCPServerError(f"MCP server {self.name!r} could not be started or listed: timed out") from e

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """`acall` for synchronous code (on the background loop)."""
        return run_coroutine(self.acall(tool, arguments), self.connect_timeout + self.timeout + 2.0)

    # the resources and prompts, for synchronous code (the tools of chatagent.tools.mcp_content, code): each request
    # written once, as what it asks of the session's client, sent by `_arequest` on the background loop

    def list_resources(self) -> list[Resource]:
        """The server's resources (every page); errors as `call`."""

        async def pages(client: Client) -> list[Resource]:
            found: list[Resource] = []
            cursor: str | None = None
            while True:
                page = await client.list_resources(cursor=cursor)
                found.extend(page.resources)
                cursor = page.next_cursor
                if not cursor:
                    return found

        return run_coroutine(self._arequest(pages), self.connect_timeout + self.timeout + 2.0)

    def read_resource(self, uri: str) -> list[TextResourceContents | BlobResourceContents]:
        """The contents of one resource; errors as `call`."""
        ask = self._arequest(lambda c: c.read_resource(uri))
        result: ReadResourceResult = run_coroutine(ask, self.connect_timeout + self.timeout + 2.0)
        return list(result.contents)

    def list_prompts(self) -> list[Prompt]:
        """The server's prompts; errors as `call`."""
        ask = self._arequest(lambda c: c.list_prompts())
        result: ListPromptsResult = run_coroutine(ask, self.connect_timeout + self.timeout + 2.0)
        return list(result.prompts)

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        """One prompt filled in with `arguments`; errors as `call`."""
        ask = self._arequest(lambda c: c.get_prompt(name, arguments))
        return run_coroutine(ask, self.connect_timeout + self.timeout + 2.0)

    def failure(self, tool: str, e: Exception) -> str:
        """What the model reads when a request for `tool` failed (a timeout, a broken session, an error)."""
        if isinstance(e, TimeoutError):
            return (
                f"Error: {tool} did not answer within {self.timeout:g} seconds. "
                "Try again later, with other arguments, or answer without it."
            )
        return f"Error: {tool} failed: {e}. A later call reconnects to the server."

    def close(self) -> None:
        """End every session, on whichever loop it lives (a stdio server's process ends with it). From the thread of
        a running loop that holds a session, that session's closing is scheduled there (await `aclose()` to wait)."""
        with self._lock:
            loops = list(self._held)
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop in loops:
            if loop.is_closed():
                continue  # its tasks were cancelled when it closed, the session with them
            if loop is here:
                loop.create_task(self._aclose_here())
            elif loop.is_running():
                try:
                    asyncio.run_coroutine_threadsafe(self._aclose_here(), loop).result(15)
                except Exception:  # closing must not raise; the process is gone or going
                    logger.debug("closing MCP server %r failed", self.name, exc_info=True)

    async def aclose(self) -> None:
        """End this loop's session and wait for it; the other loops' as `close()` does."""
        await self._aclose_here()
        await asyncio.to_thread(self.close)


def _is_json_object(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether a value from the user's config is a JSON object (a dict)."""
    return isinstance(value, dict)


def _describe(e: BaseException) -> str:
    """An exception in a line: the innermost of an exception group, with its type."""
    group: object = getattr(e, "exceptions", None)
    while isinstance(group, tuple) and group and isinstance(group[0], BaseException):  # an ExceptionGroup (3.11+)
        e = group[0]
        group = getattr(e, "exceptions", None)
    text = str(e).strip().replace("\n", " ")[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# ---- tools -------------------------------------------------------------------------------------------------------


class MCPTool(BaseTool):
    """One tool of an MCP server."""

    third_party = True  # its name and description are the server's

    def __init__(self, connection: MCPConnection, tool: Tool) -> None:
        self.name = f"{connection.name}-{tool.name}"
        self.description = tool.description or ""
        parameters: dict[str, Any] = dict(tool.input_schema) or {"type": "object", "properties": {}}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        self.parameters = parameters
        self.connection = connection
        self.tool_name = tool.name
        super().__init__({"timeout": connection.timeout + connection.connect_timeout + 5.0})

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[ContentItem]:
        args = self.parse_params(params)
        try:
            return self._content(self.connection.call(self.tool_name, args))
        except (TimeoutError, MCPServerError) as e:
            return self._failure(e)

    async def acall(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[ContentItem]:
        """`call` on the running loop, in the session that lives there (what `arun()` awaits)."""
        args = self.parse_params(params)
        try:
            return self._content(await self.connection.acall(self.tool_name, args))
        except (TimeoutError, MCPServerError) as e:
            return self._failure(e)

    def _failure(self, e: Exception) -> str:
        return self.connection.failure(self.name, e)

    def _content(self, result: CallToolResult) -> str | list[ContentItem]:
        content = result_to_content(result)
        if result.is_error:
            text = content if isinstance(content, str) else "\n".join(c.text for c in content if c.text)
            return f"Error: {self.name} failed: {text or 'the server reported an error'}"
        return content

    def close(self) -> None:
        self.connection.close()


def tools_from_config(item: dict[str, Any]) -> list[BaseTool]:
    """The tools of every server in `{'mcpServers': {name: cfg, ...}}` (used by `make_tools`)."""
    try:
        importlib.import_module("mcp")
    except ImportError as e:
        raise ValueError("mcpServers needs the mcp package: pip install 'chatagent[mcp]'") from e
    servers = item.get("mcpServers")
    if not _is_json_object(servers) or not servers:
        raise ValueError(f"mcpServers must be a dict of server name -> config, got {servers!r:.200}")
    tools: list[BaseTool] = []
    opened: list[MCPConnection] = []
    try:
        for name, cfg in servers.items():
            conn = MCPConnection(name, cfg)
            opened.append(conn)
            tools.extend(MCPTool(conn, t) for t in conn.list_tools())
            tools.extend(server_tools(conn, conn.capabilities))
    except BaseException:
        for conn in opened:
            conn.close()
        raise
    return tools


@atexit.register
def close_all() -> None:
    """End every MCP session (run at interpreter exit)."""
    for conn in list(_CONNECTIONS):
        conn.close()


__all__ = ["MCPConnection", "MCPServerError", "MCPTool", "close_all", "result_to_content", "tools_from_config"]
