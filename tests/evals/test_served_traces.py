"""`chatagent serve --traces`: each API client's runs recorded as its own traces and served back to it alone, over
real HTTP on loopback, as two principals would use it (and attack it); what leaves the server carries neither the
server's paths nor the keys it knows."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from chatagent import FnCallAgent, ScriptedLLM, tool_call
from chatagent.run.traces import flush_traces
from chatagent.server.runner import AgentServer, asgi_app
from chatagent.utils.keys import remember_secret

pytestmark = pytest.mark.timeout(120)
KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-9876543210"}
SECRET = "sk-5f3e2a1b9c8d7e6f4a0b"  # a key the server holds (its model's): never in what a client reads


def served(tmp_path: Path) -> AgentServer:
    notes = tmp_path / "private" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("the meeting is at noon")
    remember_secret(SECRET)

    def read_notes(who: str) -> str:
        """Read a user's notes."""
        return f"{who}'s notes ({notes}): {notes.read_text()}; upstream key {SECRET}"

    def model(messages, functions):  # noqa: ANN001, ANN202
        last = messages[-1]
        if last.role == "function":
            return "The meeting is at noon."
        return tool_call("read_notes", {"who": last.text.split()[-1].strip("?")})

    agent = FnCallAgent(llm=ScriptedLLM(default=model), function_list=[read_notes], name="notes")
    store = f"sqlite:///{tmp_path}/served.db"
    return AgentServer(agent, "127.0.0.1", 0, api_key=KEYS, store=store, traces=True).start()


def ask(http: httpx.Client, key: str, text: str, **body: object) -> dict:
    r = http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                  json={"model": "notes", "messages": [{"role": "user", "content": text}], **body})  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()


def test_each_client_reads_only_its_own_traces_and_no_path_or_key_leaves(tmp_path: Path) -> None:
    with served(tmp_path) as server, httpx.Client(base_url=server.url[: -len("/v1")], timeout=60) as http:
        assert ask(http, KEYS["alice"], "When is the meeting for alice?")["choices"][0]["message"]["content"]
        ask(http, KEYS["bob"], "When is the meeting for bob?", session_id="new")  # a session's run (detached)
        assert flush_traces(30)

        def get(key: str, path: str) -> httpx.Response:
            return http.get(path, headers={"Authorization": f"Bearer {key}"})

        mine, theirs = get(KEYS["alice"], "/v1/traces").json()["data"], get(KEYS["bob"], "/v1/traces").json()["data"]
        assert [t["title"] for t in mine] == ["When is the meeting for alice?"]
        assert [t["title"] for t in theirs] == ["When is the meeting for bob?"]
        alice_trace = mine[0]["id"]

        assert get(KEYS["bob"], f"/v1/traces/{alice_trace}").status_code == 404  # bob asks for alice's: not found
        assert get(KEYS["bob"], f"/v1/traces/{alice_trace}?format=otlp").status_code == 404
        assert http.get(f"/v1/traces/{alice_trace}").status_code == 401  # no key
        assert get("key-mallory-000000000", "/v1/traces").status_code == 401

        body = get(KEYS["alice"], f"/v1/traces/{alice_trace}").json()
        assert body["owner"] == "client:alice" and body["status"] == "ok"
        (tool,) = [s for s in body["steps"] if s["kind"] == "tool"]
        assert tool["name"] == "read_notes" and '"alice"' in tool["arguments"]
        assert "the meeting is at noon" in tool["result"] and "notes.txt" in tool["result"]
        text = get(KEYS["alice"], f"/v1/traces/{alice_trace}").text
        assert str(tmp_path) not in text and "private/notes.txt" not in text  # the server's folders
        assert SECRET not in text and SECRET[:12] not in text and "***" in text
        assert "key-alice" not in text

        spans = get(KEYS["alice"], f"/v1/traces/{alice_trace}?format=otlp").json()
        (scope,) = spans["resourceSpans"][0]["scopeSpans"]
        names = [s["name"] for s in scope["spans"]]
        assert names[0] == "run notes" and "tool read_notes" in names and names.count("model scripted") == 2
        tool_span = next(s for s in scope["spans"] if s["name"] == "tool read_notes")
        attrs = {a["key"]: next(iter(a["value"].values())) for a in tool_span["attributes"]}
        assert (
            '"alice"' in attrs["gen_ai.tool.call.arguments"]
            and tool_span["parentSpanId"] == scope["spans"][0]["spanId"]
        )
        assert str(tmp_path) not in str(spans) and SECRET not in str(spans)


def test_serving_traces_needs_a_key_per_client(tmp_path: Path) -> None:
    agent = FnCallAgent(llm=ScriptedLLM(default="hi"))
    with pytest.raises(ValueError, match="needs api_key"):
        asgi_app(agent, traces=True, store=f"sqlite:///{tmp_path}/s.db")


def test_a_server_without_traces_says_so(tmp_path: Path) -> None:
    agent = FnCallAgent(llm=ScriptedLLM(default="hi"), name="hi")
    with AgentServer(agent, "127.0.0.1", 0, api_key="k-0123456789", store=f"sqlite:///{tmp_path}/s.db").start() as s:
        r = httpx.get(s.url + "/traces", headers={"Authorization": "Bearer k-0123456789"}, timeout=30)
        assert r.status_code == 404 and r.json()["error"]["code"] == "traces_not_recorded"
