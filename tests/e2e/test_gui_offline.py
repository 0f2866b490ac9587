"""The web UI reaches nothing but loopback: no analytics, no version check, no share server, no CDN."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SCRIPT = textwrap.dedent(
    """
    import json, socket, sys

    attempts = []

    def hook(event, args):
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple):
                attempts.append(str(address[0]))
        elif event == "socket.getaddrinfo":
            attempts.append(str(args[0]))

    sys.addaudithook(hook)
    sys.path.insert(0, sys.argv[1])
    from chatagent import BasicAgent, ScriptedLLM
    from chatagent.gui import WebUI
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ui = WebUI(BasicAgent(llm=ScriptedLLM(default="hello")))
    url = ui.run(server_port=port, block=False)
    from gradio_client import Client
    chat, _ = Client(url, verbose=False).predict({"text": "hi", "files": []}, None, api_name="/chat")
    page = httpx.get(url, timeout=10).text
    ui.close()
    print(json.dumps({"attempts": sorted(set(attempts)), "answer": chat[-1]["content"][0]["text"], "page": page}))
    """
)


def test_launch_and_a_chat_touch_only_loopback() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root)}  # no GRADIO_* or proxy settings from the caller
    out = processes.run(
        [sys.executable, "-c", SCRIPT, str(root)], capture_output=True, text=True, timeout=100, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["answer"] == "hello"
    outside = [a for a in report["attempts"] if a not in ("127.0.0.1", "localhost", "::1", "0.0.0.0")]
    assert outside == [], f"the web UI tried to reach {outside}"
    assert "googleapis" not in report["page"] and "cdn." not in report["page"]
