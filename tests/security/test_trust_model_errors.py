"""A model server's failures as `chatagent serve` reports them (issue 36, item 6): a client's error names no model
server (before the fix a 401, 403 or 404 from the backend came back as a 502 naming
`http://gwuser:PASSWORD@host/v1`), and the server's log (`chatagent -v serve`) keeps neither the URL's password nor
a `Basic` credential."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from chatagent import BasicAgent
from chatagent.server.runner import AgentServer
from chatagent.utils.keys import mask_secrets
from tests.cli.test_cli_command import IGNORED, Proc, _free_port
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(120)

PASSWORD = "gw-PASSWORD-7f3a"
BASIC = base64.b64encode(b"proxyuser:proxy-pass-99").decode()


def gateway(openai_server: OpenAIServer) -> str:
    return openai_server.base_url.replace("http://", f"http://gwuser:{PASSWORD}@")


@pytest.mark.parametrize("status", [401, 403, 404, 500])
def test_a_clients_error_names_no_model_server(openai_server: OpenAIServer, status: int) -> None:
    openai_server.add(Reply(status=status, error={"message": "denied"}))
    llm = {"model": "m", "model_server": gateway(openai_server), "api_key": "k", "generate_cfg": {"max_retries": 0}}
    with AgentServer(BasicAgent(llm=llm, name="b"), "127.0.0.1", 0) as server:
        body = {"model": "b", "messages": [{"role": "user", "content": "hi"}]}
        response = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)
    assert response.status_code == 502
    text = response.text
    host = openai_server.base_url.split("//")[1].split("/")[0]
    for leaked in (PASSWORD, "gwuser", host, "/v1"):
        assert leaked not in text, f"{leaked!r} in the client's error: {text}"
    assert f"{status}" in response.json()["error"]["code"]


def test_the_servers_log_masks_url_passwords_and_basic_credentials(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.add(Reply(status=401, error={"message": "denied"}))
    llm = {
        "model": "m", "model_server": gateway(openai_server), "api_key": "k",
        "generate_cfg": {"max_retries": 0, "extra_headers": {"X-Gateway-Auth": f"Basic {BASIC}"}},
    }  # fmt: skip
    agent_file = tmp_path / "gw.py"
    agent_file.write_text(f"from chatagent import BasicAgent\nbot = BasicAgent(llm={llm!r}, name='b')\n")
    port = _free_port()
    proc = Proc(["-v", "serve", "--agent", f"{agent_file}:bot", "--port", str(port)], IGNORED)
    try:
        proc.read_until("serving", 60)
        body = {"model": "b", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60).status_code == 502
        log = proc.read_until("401", 30)
    finally:
        proc.close()
    assert openai_server.requests[-1].headers["x-gateway-auth"] == f"Basic {BASIC}"  # it was sent
    assert PASSWORD not in log, "the URL's password is in the log"
    assert BASIC not in log, "the Basic credential is in the log"


def test_mask_secrets_masks_basic_and_url_userinfo() -> None:
    text = (
        f"POST http://gwuser:{PASSWORD}@10.0.0.5/v1 with Authorization: Basic {BASIC} and https://tok3n@git.example/x"
    )
    masked = mask_secrets(text)
    assert PASSWORD not in masked and BASIC not in masked and "tok3n" not in masked
    assert "http://***@10.0.0.5/v1" in masked and "Basic ***" in masked and "https://***@git.example/x" in masked
