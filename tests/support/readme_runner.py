"""Run one README snippet as a user would, with loopback model servers in place of the real ones.

    python -m tests.support.readme_runner snippet.py      (cwd: a scratch directory holding the files it names)

The process first moves into a network namespace of its own (only its own 127.0.0.1: nothing reaches the
network, and the addresses the README names are free), then starts:

- the loopback OpenAI-compatible server (tests/support/openai_server.py) on 127.0.0.1:8000, the vLLM address
  the snippets use, and as the default model (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL`);
- the loopback DashScope server (tests/support/dashscope_server.py) as `DASHSCOPE_HTTP_BASE_URL`, the SDK's own
  base-URL setting; `DASHSCOPE_API_KEY` is set only for a snippet that names DashScope (so that the others get
  the OpenAI-compatible default, as `default_llm_config()` prefers DashScope when its key is set).

A snippet that names an MCP server at 127.0.0.1:8765 gets tests/support/mcp_servers/demo_server.py there (streamable
HTTP); the test's scratch directory holds the same server as `server.py`, for the stdio entry.

Both model servers answer every request from what it asks (`answer()`): a call of its first tool when it offers tools and no
tool has answered yet, a JSON object matching the schema when it asks for structured output, ALLOW for a judge,
else a short text. Then the snippet runs as `__main__`; a function `test_*(openai_server)` it defines (the
README's pytest example) is called with the OpenAI server, emptied, as the fixture would give it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import runpy
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
VLLM_PORT = 8000
MCP_PORT = 8765
SAMPLES = {"city": "Paris", "to": "Bob", "code": "print(6 * 7)", "query": "install packages", "name": "Tokyo"}
SCHEMA_HEAD = "matches this JSON Schema, with nothing before or after it (no code fences, no commentary):\n"


def private_network() -> None:
    """Enter a new network namespace and bring its loopback interface up. Without root, first a user namespace
    where this process keeps its own uid and gid (and, until it executes a program, the capabilities to do it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "cannot make a network namespace (unshare) for the README snippets")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def example(schema: dict, root: dict, name: str = "") -> Any:
    """A value that satisfies a (simple) JSON Schema."""
    if "$ref" in schema:
        schema = root.get("$defs", {}).get(schema["$ref"].rsplit("/", 1)[-1], {})
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return example(options[0], root, name)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: example(v, root, k) for k, v in props.items() if k in schema.get("required", props)}
    if kind == "array":
        return []
    return {"integer": 500, "number": 500.0, "boolean": False}.get(kind, SAMPLES.get(name, "Paris"))


def answer(messages: list[dict], tools: list[dict]) -> tuple[str, Any]:
    """('call', (name, arguments)) or ('text', text): what the loopback model says to this request."""
    last = messages[-1]["role"] if messages else "user"
    prompt = "\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "user"))
    if tools and last == "user":
        fn = tools[0].get("function", tools[0])
        params = fn.get("parameters") or {}
        return "call", (fn["name"], example(params, params))
    if SCHEMA_HEAD in prompt:
        schema, _ = json.JSONDecoder().raw_decode(prompt.split(SCHEMA_HEAD, 1)[1])
        return "text", json.dumps(example(schema, schema))
    if "ALLOW if the text is acceptable" in prompt:
        return "text", "ALLOW"
    return "text", "Paris is sunny today, 18 degrees. [manual.pdf, p. 1]"


def start_servers(names_dashscope: bool) -> Any:
    from tests.support import dashscope_server, openai_server

    def openai_reply(req: Any) -> openai_server.Reply:
        kind, value = answer(req.json.get("messages", []), req.json.get("tools") or [])
        return openai_server.Reply(tool_calls=[value]) if kind == "call" else openai_server.Reply(text=value)

    def dashscope_reply(req: Any) -> dashscope_server.Reply:
        kind, value = answer(req.messages, req.parameters.get("tools") or [])
        return dashscope_server.Reply(tool_calls=[value]) if kind == "call" else dashscope_server.Reply(text=value)

    openai_reply.repeat = dashscope_reply.repeat = True  # type: ignore[attr-defined]
    oai = openai_server.OpenAIServer().start(VLLM_PORT).add(openai_reply)
    ds = dashscope_server.DashScopeServer().start().add(dashscope_reply)
    for key in ("DASHSCOPE_API_KEY", "DASHSCOPE_MODEL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(key, None)
    os.environ.update(
        OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=oai.base_url, OPENAI_MODEL="loopback-model", NO_PROXY="*"
    )
    os.environ["DASHSCOPE_HTTP_BASE_URL"] = ds.base_url
    if names_dashscope:
        os.environ["DASHSCOPE_API_KEY"] = "sk-loopback"
    return oai


def start_mcp_server(port: int) -> None:
    """The demo MCP server on 127.0.0.1:`port` (ended with this process); returns once it accepts connections."""
    from tests.support import processes

    server = Path(__file__).parent / "mcp_servers" / "demo_server.py"
    proc = processes.popen(
        [sys.executable, str(server), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    atexit.register(proc.kill)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"the MCP server on :{port} did not start (exit status {proc.poll()})")


def main(path: str) -> None:
    code = Path(path).read_text(encoding="utf-8")
    private_network()
    oai = start_servers("dashscope" in code)
    if f"127.0.0.1:{MCP_PORT}" in code:
        start_mcp_server(MCP_PORT)
    sys.path.insert(0, os.getcwd())  # the snippet's own modules (my_tools.py)
    namespace = runpy.run_path(path, run_name="__main__")
    for name, fn in namespace.items():
        if name.startswith("test_") and callable(fn):
            oai.reset()
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
            if marks:  # a parametrized test (chatagent.evals.dataset_test): once per parameter, as pytest would
                argname, values = marks[0].args[:2]
                for value in values:
                    fn(**{argname: value})
            else:  # a test of the loopback servers (docs/testing.md): given them, as its fixture would
                fn(oai)


if __name__ == "__main__":
    main(sys.argv[1])
