"""`chatagent serve` as a process: SIGTERM and SIGINT let the streams in flight finish (within --grace), then it exits
0, also when it was started with both signals ignored (as a background job is)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_command import IGNORED, Proc, _free_port, agent_file  # noqa: F401  (agent_file: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


class Stream(threading.Thread):
    """A streaming request read in the background: its events, and `started` once the first text came."""

    def __init__(self, port: int, question: str) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/v1/chat/completions"
        self.body = {"model": "echo", "stream": True, "messages": [{"role": "user", "content": question}]}
        self.events: list[str] = []
        self.started = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with httpx.stream("POST", self.url, json=self.body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(line[6:])
                        if len(self.events) > 1:
                            self.started.set()
        except httpx.HTTPError as e:
            self.error = e
        finally:
            self.started.set()

    def text(self) -> str:
        deltas = [json.loads(e)["choices"][0]["delta"] for e in self.events if e != "[DONE]"]
        return "".join(d.get("content") or "" for d in deltas if isinstance(d, dict))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_lets_the_streams_in_flight_finish(agent_file: Path, stop: signal.Signals) -> None:  # noqa: F811
    port = _free_port()
    proc = Proc(["serve", "--agent", f"{agent_file}:agent", "--port", str(port)], IGNORED)
    try:
        proc.read_until("serving")
        streams = [Stream(port, "slow 100") for _ in range(3)]
        for s in streams:
            assert s.started.wait(30) and s.error is None
        proc.p.send_signal(stop)
        for s in streams:
            s.join(60)
            assert s.error is None and s.events[-1] == "[DONE]"
            assert s.text() == "".join(f"w{i} " for i in range(100))  # whole, not cut
        assert proc.p.wait(30) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    finally:
        proc.close()


def test_streams_longer_than_the_grace_period_are_closed_and_it_still_exits_0(
    agent_file: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = _free_port()
    marker = tmp_path / "closed"
    args = ["serve", "--agent", f"{agent_file}:agent", "--port", str(port), "--grace", "1"]
    proc = Proc(args, IGNORED, CLOSED_MARKER=str(marker))
    try:
        proc.read_until("serving")
        stream = Stream(port, "slow 5000")  # 100 s at the model's pace
        assert stream.started.wait(30) and stream.error is None
        proc.p.send_signal(signal.SIGTERM)
        assert proc.p.wait(30) == 0
        stream.join(30)
        assert "[DONE]" not in stream.events  # cut
        assert marker.exists() and int(marker.read_text()) < 5000  # the model's stream was closed with the run
    finally:
        proc.close()
