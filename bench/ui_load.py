"""Load on the web UI: N concurrent browser-like sessions over Gradio's HTTP queue protocol, ScriptedLLM behind.

    python bench/ui_load.py [--sessions 20] [--turns 2] [--words 400] [--delay 0.005]

Each session sends its own messages and checks that every answer it gets is its own (no cross-talk) and
that its second turn saw only its own history. Prints `name: value` lines: time for all sessions, the
per-answer latency, and the bytes Gradio streamed per answer beside the reference of re-sending the whole
conversation on every update (what a UI without diffs would send).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass
class TurnResult:
    chatbot: list
    seconds: float
    updates: int
    bytes_streamed: int
    bytes_full_resend: int


@dataclass
class SessionResult:
    name: str
    turns: list[TurnResult] = field(default_factory=list)
    error: str | None = None


class GradioSession:
    """One browser-like session: its own session hash, the chat endpoint called through the queue."""

    def __init__(self, url: str, config: dict) -> None:
        from gradio_client.utils import apply_diff

        self._apply_diff = apply_diff
        self.url = url.rstrip("/")
        self.session_hash = uuid.uuid4().hex[:12]
        dep = next(d for d in config["dependencies"] if d.get("api_name") == "chat")
        self.fn_index = dep["id"]
        types = {c["id"]: c.get("type") for c in config["components"]}
        self.input_types = [types[i] for i in dep["inputs"]]
        self.http = httpx.Client(timeout=60)

    def chat(self, text: str, agent: str | None = None) -> TurnResult:
        data = []
        for kind in self.input_types:
            data.append(
                {"text": text, "files": []} if kind == "multimodaltextbox" else agent if kind == "dropdown" else None
            )
        start = time.perf_counter()
        r = self.http.post(
            f"{self.url}/gradio_api/queue/join",
            json={"data": data, "fn_index": self.fn_index, "session_hash": self.session_hash, "event_data": None},
        )
        r.raise_for_status()
        event_id = r.json()["event_id"]
        with self.http.stream(
            "GET", f"{self.url}/gradio_api/queue/data", params={"session_hash": self.session_hash}
        ) as sse:
            chatbot: list | None = None
            updates = streamed = full = 0
            for line in sse.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("event_id") != event_id:
                    continue
                kind = msg.get("msg")
                if kind == "process_generating":
                    out = msg["output"]["data"][0]
                    streamed += len(json.dumps(out))
                    chatbot = out if chatbot is None else self._apply_diff(chatbot, out)
                    full += len(json.dumps(chatbot))
                    updates += 1
                elif kind == "process_completed":
                    if not msg.get("success", True):
                        raise RuntimeError(f"the app failed: {msg.get('output')}")
                    final = msg["output"]["data"][0]
                    if final is not None and not isinstance(final, list):  # a diff of the final update
                        chatbot = self._apply_diff(chatbot, final)
                    elif isinstance(final, list) and final and isinstance(final[0], dict):
                        chatbot = final
                    break
        return TurnResult(chatbot or [], time.perf_counter() - start, updates, streamed, full)

    def close(self) -> None:
        self.http.close()


def texts(chatbot: list) -> list[str]:
    return ["".join(part.get("text", "") for part in m["content"]) for m in chatbot]


def run_load(url: str, sessions: int, turns: int) -> list[SessionResult]:
    """Run `sessions` concurrent sessions of `turns` turns each; each checks its answers are its own."""
    config = httpx.get(f"{url.rstrip('/')}/config", timeout=30).json()
    results = [SessionResult(f"s{i:02d}") for i in range(sessions)]
    barrier = threading.Barrier(sessions)

    def one(res: SessionResult) -> None:
        session = GradioSession(url, config)
        try:
            barrier.wait(timeout=30)
            for t in range(turns):
                turn = session.chat(f"{res.name} turn {t}")
                res.turns.append(turn)
                got = texts(turn.chatbot)
                want_user = [f"{res.name} turn {k}" for k in range(t + 1)]
                if got[0::2] != want_user:
                    raise AssertionError(f"{res.name}: user messages {got[0::2]} != {want_user}")
                answer = got[-1]
                if not answer.startswith(f"{res.name} turn {t} | turns seen {t + 1}:"):
                    raise AssertionError(f"{res.name}: answer from another session or history: {answer[:80]!r}")
        except Exception as e:  # reported, and counted as a failed session
            res.error = f"{type(e).__name__}: {e}"
        finally:
            session.close()

    threads = [threading.Thread(target=one, args=(r,)) for r in results]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    return results


def start_app(words: int, delay: float = 0.0) -> tuple[object, str]:
    """A WebUI over BasicAgent + ScriptedLLM whose answer names the question and the turns it saw;
    `delay` seconds between streamed chunks make it pace like a real model."""
    import socket

    from chatagent import BasicAgent, Reply, ScriptedLLM
    from chatagent.gui import WebUI

    class PacedScriptedLLM(ScriptedLLM):
        def _chat_stream(self, *args, **kwargs):
            for fragments in super()._chat_stream(*args, **kwargs):
                yield fragments
                if delay:
                    time.sleep(delay)

    def reply(messages, functions) -> Reply:
        users = sum(1 for m in messages if m.role == "user")
        text = f"{messages[-1].text} | turns seen {users}: " + "lorem ipsum " * (words // 2)
        return Reply(text=text, chunk_size=6)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ui = WebUI(BasicAgent(llm=PacedScriptedLLM(default=reply), name="bench"))
    url = ui.run(server_port=port, block=False)
    return ui, url


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--delay", type=float, default=0.005, help="seconds between the model's chunks")
    args = ap.parse_args()
    ui, url = start_app(args.words, args.delay)
    try:
        start = time.perf_counter()
        results = run_load(url, args.sessions, args.turns)
        wall = time.perf_counter() - start
    finally:
        ui.close()  # type: ignore[attr-defined]
    failed = [r for r in results if r.error]
    turns = [t for r in results for t in r.turns]
    latencies = sorted(t.seconds for t in turns)
    streamed = sum(t.bytes_streamed for t in turns)
    full = sum(t.bytes_full_resend for t in turns)
    print(f"ui_load.sessions: {args.sessions} (turns {args.turns}, chunk delay {args.delay}s)")
    print(f"ui_load.sessions_completed: {len(results) - len(failed)}")
    print(f"ui_load.wall_seconds: {wall:.2f}")
    if latencies:
        print(f"ui_load.answer_seconds_p50: {statistics.median(latencies):.3f}")
        print(f"ui_load.answer_seconds_max: {latencies[-1]:.3f}")
        print(f"ui_load.updates_per_answer_mean: {statistics.mean(t.updates for t in turns):.1f}")
        print(f"ui_load.bytes_streamed_per_answer: {streamed // len(turns)}")
        print(f"ui_load.bytes_full_resend_per_answer (reference): {full // len(turns)}")
        print(f"ui_load.streamed_vs_full_resend: {streamed / max(full, 1):.3f}")
    for r in failed:
        print(f"ui_load.failure: {r.name}: {r.error}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
