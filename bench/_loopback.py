"""The loopback OpenAI-compatible server (tests/support/openai_server.py) in a process of its own, for bench/peers.py.

    .venv/bin/python bench/_loopback.py        # prints `PORT <n>`, serves until stdin closes

A separate process, so that the server's work is not counted in a client's CPU time and does not compete for
the client's GIL. Every client gets the same answers; what to answer is chosen by the request's `model`:

- `stream-<n>`: a text of n chunks (CHUNK each), written in one go (the cached benchmark mode).
- `live-<n>`: a text of n chunks, LIVE_INTERVAL seconds apart (the first at once): a stream that lasts a while,
  for concurrent runs.
- `delegate`: a call of the first tool offered (with a `task`), then once it has a result, FINAL (bench/teams.py).
- `tools`: a tool loop: a call of `lookup_<k>` while the conversation holds k < ROUND_TRIPS tool results, then a
  final answer, FINAL; `tools-<n>`: the same with n round trips.

A framework that ends its runs through a `final_answer` tool (smolagents) gets its text, then that call.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.loopback import Request  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402

CHUNK = "tok "
LIVE_INTERVAL = 0.05
ROUND_TRIPS = 5
FINAL = "Here is what I found."


class Router:
    """The reply for every request (it stays queued: `repeat`), chosen by the request's model name."""

    repeat = True

    def __init__(self) -> None:
        self._replies: dict[tuple, Reply] = {}  # kept, so that the server's encoded stream cache works

    def __call__(self, request: Request) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        model = str(body.get("model", ""))
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        final_tool = "final_answer" in tools
        if model == "delegate":
            if any(_is_tool_result(m) for m in body.get("messages") or []):
                return Reply(text=FINAL)
            first = next(iter(sorted(t for t in tools if t)), "none")
            return Reply(tool_calls=[(first, {"task": "Find the length of the Nile."})])
        if model == "tools" or model.startswith("tools-"):
            trips = int(model[6:]) if model.startswith("tools-") else ROUND_TRIPS
            done = sum(1 for m in body.get("messages") or [] if _is_tool_result(m))
            if done < trips:
                return Reply(tool_calls=[(f"lookup_{done % 20}", {"query": f"item {done}", "limit": 3})])
            return Reply(tool_calls=[("final_answer", {"answer": FINAL})]) if final_tool else Reply(text=FINAL)
        kind, _, n = model.partition("-")
        key = (kind, int(n or 1), final_tool)
        reply = self._replies.get(key)
        if reply is None:
            calls: list[tuple[str, Any]] = [("final_answer", {"answer": "done"})] if final_tool else []
            interval = LIVE_INTERVAL if kind == "live" else 0.0
            reply = Reply(chunks=[CHUNK] * key[1], tool_calls=calls, interval=interval, repeat=True)  # repeat: cached
            self._replies[key] = reply
        return reply


def _is_tool_result(message: dict) -> bool:
    """A tool's result: a `tool` message, or (smolagents) a user message that starts with "Observation:"."""
    if message.get("role") == "tool":
        return True
    content = message.get("content")
    text = content[0].get("text", "") if isinstance(content, list) and content else content
    return message.get("role") == "user" and isinstance(text, str) and text.startswith("Observation:")


def main() -> None:
    with OpenAIServer() as server:
        server.add(Router())
        print(f"PORT {server.port}", flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or exits)


if __name__ == "__main__":
    main()
