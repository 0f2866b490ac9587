"""An MCP server for the tests (mcp's MCPServer, formerly FastMCP): `python demo_server.py stdio`,
`python demo_server.py http PORT` (streamable HTTP on 127.0.0.1:PORT/mcp) or `python demo_server.py sse PORT [PATH]`
(SSE on 127.0.0.1:PORT/sse, or PATH). Tools, two resources and a prompt."""

from __future__ import annotations

import base64
import os
import sys
import time

from mcp.server.mcpserver import Image, MCPServer
from mcp.types import EmbeddedResource, TextContent, TextResourceContents

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat a text."""
    return " ".join([text] * times)


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def picture() -> Image:
    """A tiny PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def document() -> list:
    """A text plus an embedded text resource."""
    return [
        TextContent(type="text", text="see the attached notes"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.txt", text="remember the milk", mime_type="text/plain"),
        ),
    ]


@server.resource("notes://today", name="today", description="Today's notes.")
def today() -> str:
    return "buy milk; call Ann"


@server.resource("notes://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return PNG


@server.prompt(description="Ask for a summary of a topic.")
def summarise(topic: str, words: str = "50") -> str:
    return f"Summarise {topic} in at most {words} words."


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["sse"]:
        path = sys.argv[3] if len(sys.argv) > 3 else "/sse"
        server.run(transport="sse", host="127.0.0.1", port=int(sys.argv[2]), sse_path=path)
    else:
        server.run()
