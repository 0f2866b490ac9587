"""MCP servers as tools: every tool of every configured server becomes a chatagent tool named `server-tool`.

    bot = FnCallAgent(llm=cfg, function_list=[{'mcpServers': {
        'files': {'command': 'python', 'args': ['server.py'], 'env': {...}, 'cwd': '...'},   # stdio
        'remote': {'url': 'http://127.0.0.1:8765/mcp', 'headers': {...}},                   # streamable HTTP
    }}])
    ...
    bot.close()   # ends the stdio servers and everything they started (they also end when the agent's process does)

Each server gets one session, opened when the agent is built (its tools are listed then) and reused by every
call; a session that broke (the server died, the connection dropped) is reopened by the next call. Every
call has a timeout (`timeout` in the server's config, default 30 s; `connect_timeout` for opening, default
30 s). A tool error, a timeout or a dead server comes back as a function message the model can read, never
as a hang. A stdio server runs under a reaper (`chatagent/tools/_reaper.py`): every process it starts, even one
that detaches, is ended with it, and it is ended when the agent's process ends, however that ends. Text, image,
audio and resource contents become content items. Needs the `mcp` package (>= 2):
``pip install 'chatagent[mcp]'``. The sessions live on one asyncio loop in a background thread.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import shutil
import sys
import threading
import weakref
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from chatagent.schema import ContentItem
from chatagent.tools.base import BaseTool

logger = logging.getLogger("chatagent.tools")

DEFAULT_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 30.0
_REAPER = str(Path(__file__).with_name("_reaper.py"))
_CONNECTIONS: weakref.WeakSet[MCPConnection] = weakref.WeakSet()


class MCPServerError(RuntimeError):
    """An MCP server could not be started or reached (the message names the server)."""


# ---- the background loop -----------------------------------------------------------------------------------


class _Loop:
    """One asyncio loop in a daemon thread, serving every MCP session of the process."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="chatagent-mcp", daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Any, timeout: float | None) -> Any:
        """Run `coro` on the loop and wait for it; on timeout it is cancelled and TimeoutError raised."""
        future = asyncio.run_coroutine_threadsafe(coro, self.get())
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError from None


_LOOP = _Loop()
_CONNECTION_CLOSED, _REQUEST_TIMEOUT = -32000, -32001  # JSON-RPC codes the mcp client uses for these


# ---- one server ------------------------------------------------------------------------------------------------


class MCPConnection:
    """The session with one MCP server: opened on demand, reused, reopened after it broke."""

    def __init__(self, name: str, cfg: dict) -> None:
        if not isinstance(cfg, dict) or not (cfg.get("command") or cfg.get("url")):
            raise ValueError(
                f"MCP server {name!r}: its config needs 'command' (stdio) or 'url' (HTTP), got {cfg!r:.200}"
            )
        self.name = name
        self.cfg = cfg
        self.timeout = float(cfg.get("timeout", DEFAULT_TIMEOUT))
        self.connect_timeout = float(cfg.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT))
        self._client: Any = None
        self._closing: asyncio.Event | None = None
        self._holder: asyncio.Task | None = None
        self._open_lock: asyncio.Lock | None = None  # created on the loop
        _CONNECTIONS.add(self)

    def _server(self) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        cfg = self.cfg
        if cfg.get("url"):
            url = cfg["url"]
            headers = cfg.get("headers")
            if not headers:
                return url
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
        command = str(cfg["command"])
        where = os.path.join(cfg.get("cwd") or ".", command) if "/" in command else None
        path = (cfg.get("env") or {}).get("PATH") or os.environ.get("PATH")
        if not (os.access(where, os.X_OK) if where else shutil.which(command, path=path)):
            raise FileNotFoundError(f"the command {command!r} was not found (or is not executable)")
        # the server runs under a reaper: whatever it starts (even detached) ends with it, and it ends with us
        reaper = ["-I", "-S", _REAPER, "--parent", str(os.getpid()), "--grace", "1", "--", command]
        args = reaper + [str(a) for a in cfg.get("args", [])]
        params = StdioServerParameters(command=sys.executable, args=args, env=cfg.get("env"), cwd=cfg.get("cwd"))
        return stdio_client(params)

    async def _hold(self, ready: asyncio.Future) -> None:
        """Open the session and keep it open (in this one task, as anyio requires) until asked to close."""
        from mcp import Client

        self._closing = asyncio.Event()
        try:
            async with Client(self._server(), read_timeout_seconds=self.timeout, mode="auto") as client:
                self._client = client
                ready.set_result(client)
                await self._closing.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            elif not isinstance(e, asyncio.CancelledError):
                logger.warning("MCP server %r: the session ended: %s", self.name, _describe(e))
        finally:
            self._client = None

    async def _open(self) -> Any:
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            return await self._open_locked()

    async def _open_locked(self) -> Any:
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._holder = asyncio.get_running_loop().create_task(self._hold(ready))
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except BaseException:
            await self._aclose()
            raise

    async def _aclose(self) -> None:
        holder, self._holder = self._holder, None
        if holder is None:
            return
        if self._closing is not None:
            self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), 5)
        except BaseException:
            holder.cancel()
            try:
                await asyncio.wait_for(holder, 5)
            except BaseException:  # the transport's own cleanup failed: nothing more we can do
                logger.debug("MCP server %r did not close cleanly", self.name, exc_info=True)
        self._client = None

    def list_tools(self) -> list[Any]:
        """The server's tools (connecting first). Raises MCPServerError."""

        async def go() -> list[Any]:
            client = await self._open()
            tools: list[Any] = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = getattr(page, "next_cursor", None)
                if not cursor:
                    return tools

        try:
            return _LOOP.run(go(), self.connect_timeout + self.timeout)
        except Exception as e:
            self.close()
            raise MCPServerError(f"MCP server {self.name!r} could not be started or listed: {_describe(e)}") from e

    def call(self, tool: str, arguments: dict) -> Any:
        """Call a tool; the CallToolResult. Raises TimeoutError, or MCPServerError when the session broke."""
        from mcp.shared.exceptions import MCPError

        async def go() -> Any:
            client = await self._open()
            return await client.call_tool(tool, arguments, read_timeout_seconds=self.timeout)

        try:
            return _LOOP.run(go(), self.connect_timeout + self.timeout + 1.0)
        except TimeoutError:
            raise
        except MCPError as e:
            if e.code == _REQUEST_TIMEOUT:
                raise TimeoutError from e
            if e.code != _CONNECTION_CLOSED:  # a JSON-RPC error from a live server: the session is fine
                raise MCPServerError(f"the server answered with an error: {e}") from e
            self.close()
            raise MCPServerError(f"the connection to MCP server {self.name!r} was closed") from e
        except Exception as e:
            self.close()  # the next call opens a new session
            raise MCPServerError(f"the connection to MCP server {self.name!r} failed: {_describe(e)}") from e

    def close(self) -> None:
        """End the session (a stdio server's process ends with it)."""
        if self._holder is None:
            return
        try:
            _LOOP.run(self._aclose(), 15)
        except Exception:  # closing must not raise; the process is gone or going
            logger.debug("closing MCP server %r failed", self.name, exc_info=True)


def _describe(e: BaseException) -> str:
    """An exception in a line: the innermost of an exception group, with its type."""
    while isinstance(getattr(e, "exceptions", None), tuple) and e.exceptions:  # an ExceptionGroup (3.11+)
        e = e.exceptions[0]
    text = str(e).strip().replace("\n", " ")[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# ---- tools -------------------------------------------------------------------------------------------------------


class MCPTool(BaseTool):
    """One tool of an MCP server."""

    def __init__(self, connection: MCPConnection, tool: Any) -> None:
        self.name = f"{connection.name}-{tool.name}"
        self.description = getattr(tool, "description", None) or ""
        schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
        self.parameters = dict(schema) or {"type": "object", "properties": {}}
        self.parameters.setdefault("type", "object")
        self.parameters.setdefault("properties", {})
        self.connection = connection
        self.tool_name = tool.name
        super().__init__({"timeout": connection.timeout + connection.connect_timeout + 5.0})

    def call(self, params: str | dict, **kwargs: Any) -> str | list[ContentItem]:
        args = self.parse_params(params)
        try:
            result = self.connection.call(self.tool_name, args)
        except TimeoutError:
            return (
                f"Error: {self.name} did not answer within {self.connection.timeout:g} seconds. "
                "Try again later, with other arguments, or answer without it."
            )
        except MCPServerError as e:
            return f"Error: {self.name} failed: {e}. A later call reconnects to the server."
        content = result_to_content(result)
        if getattr(result, "is_error", None) or getattr(result, "isError", False):
            text = content if isinstance(content, str) else "\n".join(c.text for c in content if c.text)
            return f"Error: {self.name} failed: {text or 'the server reported an error'}"
        return content

    def close(self) -> None:
        self.connection.close()


def result_to_content(result: Any) -> str | list[ContentItem]:
    """A CallToolResult as message content: a string when it is all text, else content items."""
    items: list[ContentItem] = []
    for c in getattr(result, "content", None) or []:
        kind = getattr(c, "type", "")
        mime = getattr(c, "mime_type", None) or getattr(c, "mimeType", None)
        if kind == "text":
            items.append(ContentItem(text=c.text))
        elif kind == "image":
            items.append(ContentItem(image=f"data:{mime or 'image/png'};base64,{c.data}"))
        elif kind == "audio":
            items.append(ContentItem(audio=f"data:{mime or 'audio/wav'};base64,{c.data}"))
        elif kind == "resource":
            res = c.resource
            rmime = getattr(res, "mime_type", None) or getattr(res, "mimeType", None)
            if getattr(res, "text", None) is not None:
                items.append(ContentItem(text=f"[resource {res.uri}]\n{res.text}"))
            elif rmime and rmime.startswith("image/"):
                items.append(ContentItem(image=f"data:{rmime};base64,{res.blob}"))
            else:
                items.append(ContentItem(text=f"[resource {res.uri} ({rmime or 'binary'}), not shown]"))
        elif kind == "resource_link":
            items.append(ContentItem(text=f"[resource link {c.uri}]"))
        else:
            items.append(ContentItem(text=f"[{kind or 'unknown'} content, not shown]"))
    if not items:
        structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
        return json.dumps(structured, ensure_ascii=False) if structured is not None else ""
    if all(i.text is not None for i in items):
        return "\n".join(i.text for i in items)  # type: ignore[misc]
    return items


def tools_from_config(item: dict) -> list[BaseTool]:
    """The tools of every server in `{'mcpServers': {name: cfg, ...}}` (used by `make_tools`)."""
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise ValueError("mcpServers needs the mcp package: pip install 'chatagent[mcp]'") from e
    servers = item.get("mcpServers")
    if not isinstance(servers, dict) or not servers:
        raise ValueError(f"mcpServers must be a dict of server name -> config, got {servers!r:.200}")
    tools: list[BaseTool] = []
    opened: list[MCPConnection] = []
    try:
        for name, cfg in servers.items():
            conn = MCPConnection(name, cfg)
            opened.append(conn)
            tools.extend(MCPTool(conn, t) for t in conn.list_tools())
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
