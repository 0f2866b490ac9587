"""A served conversation's checkpoint history over `chatagent serve`: the principal lists it, forks a turn at a step
and resumes the fork on another replica (the steps before are not run again, the original conversation unchanged);
another API key can neither list nor fork it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_command import Proc, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

AGENT_MODULE = '''
import os

from chatagent import FnCallAgent, tool
from chatagent.llm.base import BaseChatModel
from chatagent.schema import FunctionCall
from chatagent.schema.fragment import Fragment

EFFECTS = os.environ["EFFECTS"]


@tool
def step(n: int) -> str:
    """Do step n."""
    with open(EFFECTS, "a") as f:
        f.write(f"step {n}\\n")
    return f"did {n}"


class Steps(BaseChatModel):
    """Calls step 1, then step 2, then says which results it read."""

    def _chat_stream(self, messages, functions, cfg, usage):
        done = [m.text for m in messages if m.role == "function"]
        last = [m for m in messages if m.role == "user"][-1].text
        if len(done) < 2:
            call = FunctionCall("step", '{"n": %d}' % (len(done) + 1))
            yield [Fragment.unchecked("assistant", "", None, call, None, {"function_id": f"c{len(done)}"}, 0)]
            return
        said = ", ".join(f"did {n}" for n in (1, 2) if any(f"did {n}" in d for d in done))
        yield [Fragment.unchecked("assistant", f"{last}: {said}", None, None, None, None, 0)]


agent = FnCallAgent(llm=Steps({"model": "steps"}), function_list=[step], name="steps")
'''


def _call(port: int, method: str, path: str, key: str, body: dict | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, f"http://127.0.0.1:{port}{path}", json=body, headers=headers, timeout=60)


def test_a_principal_lists_forks_and_resumes_its_history_and_another_cannot(store_url: str, tmp_path: Path) -> None:
    agent = tmp_path / "steps_agent.py"
    agent.write_text(textwrap.dedent(AGENT_MODULE))
    effects = tmp_path / "effects.txt"
    keys = tmp_path / "keys.txt"
    keys.write_text("key-alice-0123456789\nkey-bob-0123456789ab\n")
    ports = [_free_port(), _free_port()]
    store = store_url  # SQLite, and a real PostgreSQL server
    args = ["--agent", f"{agent}:agent", "--store", store, "--api-key-file", str(keys)]
    a, b = (Proc(["serve", *args, "--port", str(port)], EFFECTS=str(effects)) for port in ports)
    try:
        a.read_until("serving")
        b.read_until("serving")
        alice, bob = "key-alice-0123456789", "key-bob-0123456789ab"
        body = {"model": "steps", "session_id": "work", "messages": [{"role": "user", "content": "Go"}]}
        r = _call(ports[0], "POST", "/v1/chat/completions", alice, body)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Go: did 1, did 2"
        r = _call(ports[0], "GET", "/v1/sessions/work/history", alice)
        assert r.status_code == 200, r.text
        history = r.json()["data"]
        assert [(c["id"], c["kind"]) for c in history] == [("1.1", "input"), ("1.2", "model"), ("1.3", "tools"),
                                                          ("1.4", "model"), ("1.5", "tools"), ("1.6", "model")]  # fmt: skip
        assert all(isinstance(c["at"], float) for c in history)
        for method, path in (("GET", "/v1/sessions/work/history"), ("POST", "/v1/sessions/work/fork")):
            r = _call(ports[1], method, path, bob, {"checkpoint": "1.3"} if method == "POST" else None)
            assert r.status_code == 404 and "1.3" not in r.text and "did" not in r.text  # not bob's: nothing shown
        r = _call(ports[1], "POST", "/v1/sessions/work/fork", alice, {"checkpoint": "7.7"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "checkpoint_not_found"
        r = _call(ports[1], "POST", "/v1/sessions/work/fork", alice, {"checkpoint": "1.3", "extra": 1})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_fork"

        r = _call(ports[1], "POST", "/v1/sessions/work/fork", alice, {"checkpoint": "1.3"})  # after step 1's result
        assert r.status_code == 201, r.text
        fork = r.json()
        assert fork["pending"] is True and fork["forked_from"] == {"id": "work", "checkpoint": "1.3"}
        a.close()  # the replica that ran the original is gone: the fork goes on on the other
        resume = {"model": "steps", "session_id": fork["id"], "resume": True}
        r = _call(ports[1], "POST", "/v1/chat/completions", bob, resume)  # bob names alice's fork: nothing of it
        assert "did 1" not in r.text
        r = _call(ports[1], "POST", "/v1/chat/completions", alice, resume)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Go: did 1, did 2"
        assert effects.read_text().splitlines() == ["step 1", "step 2", "step 2"]  # step 1 was not run again
        r = _call(ports[1], "GET", "/v1/sessions/work/history", alice)
        assert r.json()["data"] == history  # the original is unchanged
        r = _call(ports[1], "GET", f"/v1/sessions/{fork['id']}/history", alice)
        assert len(r.json()["data"]) == 6
    finally:
        a.close()
        b.close()
