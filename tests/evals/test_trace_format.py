"""How a trace is stored: a recorded run's row holds the compact version 2 body, compressed, and reads back in the
shape every reader takes (version 1's); a row an older chatagent wrote (plain JSON, version 1) still reads as it
was; a damaged body is a clear error."""

from __future__ import annotations

import zlib
from typing import Any

import orjson
import pytest

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call
from chatagent.run import traces
from chatagent.sessions.errors import SessionStoreError
from chatagent.sessions.traces import SAVE, TraceStore

CITIES = ["Oslo", "Rome", "Lima", "Pune", "Kyiv"]


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def raw_body(url: str, trace_id: str) -> bytes:
    rows = TraceStore(url).store._read("SELECT body FROM chatagent_traces WHERE trace_id = ?", (trace_id,))
    return bytes(rows[0][0])


def test_a_long_tool_loop_is_stored_compact_and_reads_back_call_by_call(sqlite_url: str) -> None:
    replies: list[Any] = [tool_call("weather", {"city": c}) for c in CITIES] + ["All sunny."]
    bot = FnCallAgent(llm=ScriptedLLM(replies), function_list=[weather], name="forecaster", traces=sqlite_url)
    bot.run_nonstream([{"role": "user", "content": "Weather in five cities?"}])
    assert traces.flush_traces(30)
    (info,) = TraceStore(sqlite_url).list("local")
    stored = raw_body(sqlite_url, info.id)
    body = orjson.loads(zlib.decompress(stored))  # compressed: an older reader cannot mistake it for JSON
    assert body["version"] == 2
    assert len(stored) < len(orjson.dumps(TraceStore(sqlite_url).get("local", info.id))) / 2

    trace = TraceStore(sqlite_url).get("local", info.id)
    assert trace is not None
    models = [s for s in trace["steps"] if s["kind"] == "model"]
    tools = [s for s in trace["steps"] if s["kind"] == "tool"]
    assert [s["id"] for s in trace["steps"]] == list(range(1, len(trace["steps"]) + 1))
    assert [t["result"] for t in tools] == [f"sunny in {c}" for c in CITIES]
    for n, call in enumerate(models):  # the n-th call got the question and the n calls and results before it
        sent = [trace["messages"][i] for i in call["input"]]
        assert [m["role"] for m in sent] == ["user"] + ["assistant", "function"] * n
        assert [m["function_call"]["arguments"] for m in sent if m.get("function_call")] == [
            f'{{"city": "{c}"}}' for c in CITIES[:n]]  # fmt: skip
        assert set(call["usage"]) >= {"input_tokens", "output_tokens"} and call["duration"] >= 0
        assert trace["started"] <= call["start"] <= trace["started"] + trace["duration"] + 1e-3
    assert trace["messages"][models[-1]["output"][0]]["content"] == "All sunny."
    assert len(trace["messages"]) == 1 + 2 * len(CITIES) + 1  # each message once, however often it was sent


def test_a_row_an_older_version_wrote_still_reads_as_it_was(sqlite_url: str) -> None:
    old = {"id": "t-old", "owner": "alice", "kind": "run", "name": "forecaster", "title": "Weather?", "started": 5.0,
           "duration": 0.5, "status": "ok", "usage": {"input_tokens": 7, "output_tokens": 2, "calls": 1},
           "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Sunny."}],
           "steps": [{"id": 1, "kind": "run", "name": "forecaster", "parent": None, "start": 5.0, "duration": 0.5},
                     {"id": 2, "kind": "model", "name": "scripted", "parent": 1, "start": 5.1, "duration": 0.1,
                      "input": [0], "output": [1], "usage": {"input_tokens": 7, "output_tokens": 2}}]}  # fmt: skip
    store = TraceStore(sqlite_url)
    row = ("t-old", "alice", "forecaster", "run", "ok", 5.0, 0.5, 7, 2, None, 2, "Weather?", orjson.dumps(old))
    with store.store._write() as cur:  # as version 1 wrote it: the JSON itself
        cur.execute(SAVE, row)
    assert store.get("alice", "t-old") == old
    assert store.get("bob", "t-old") is None


def test_a_damaged_body_is_a_clear_error(sqlite_url: str) -> None:
    store = TraceStore(sqlite_url)
    store.save({"id": "t1", "owner": "alice", "name": "a", "started": 1.0, "steps": []})
    with store.store._write() as cur:
        cur.execute("UPDATE chatagent_traces SET body = ? WHERE trace_id = ?", (b"\x78\x01garbage", "t1"))
    with pytest.raises(SessionStoreError, match="damaged"):
        store.get("alice", "t1")
