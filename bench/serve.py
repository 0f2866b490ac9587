"""`chatagent serve` under 1,000 concurrent streaming clients, beside the limit and the server it replaced.

    .venv/bin/python bench/serve.py [--clients 1000] [--chunks 100] [--interval 0.02] [--quick]

On loopback, each in a process of its own: a lean upstream (bench/_sse_upstream.py: CHUNKS content chunks per
answer, one every INTERVAL seconds), the server under test, and the clients (bench/_serve_client.py: aiohttp,
CLIENTS streams started at once, each answer checked whole). The servers in turn (bench/_serve_targets.py):

- chatagent: `AgentServer` (uvicorn + Starlette) over a BasicAgent on the upstream, streaming with `arun()`, with
  two API keys (each client sends one) and the Host, Origin and content-type checks;
- unchecked: the same server without the key and the Host/Origin guard (what the identity checks cost);
- relay: a bare Starlette app on the same uvicorn forwarding the upstream's bytes with httpx (the limit);
- stdlib: main's thread-per-connection server before the ASGI move (bench/_stdlib_server.py);
- checked, checked_sentences: the chatagent server with an output check (a regular expression) on the whole answer
  (its text held until the answer is complete) or on each sentence (each shown once checked): streams per second
  and first-chunk latency with output checks on, beside the chatagent server without them.

Figures per server: streams completed with the full text, p50/p99 time to first content chunk, content chunks per
second (all clients' chunks / wall time), the server's peak RSS. Goals: chatagent completes every stream, its
chunks/s >= 0.7x the relay's, and it is ahead of the stdlib server on every figure (ratios printed). Each server
gets a warm-up of a few streams first. Then, in this process, the per-request cost of the identity and ownership
checks alone: the principal from the key, the Host/Origin check, and opening a stored conversation (its owner's
row, its size quota) beside binding a Session as before. Every helper is started with default signal handling and a deadline,
and stopped (SIGTERM, then SIGKILL) whatever happens. `make bench` runs the default (1,000 clients, about 3-4
minutes on a loaded 2-core machine, mostly the stdlib server); --quick (100 clients) takes about 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

from _measure import show  # noqa: E402

TARGETS = ("chatagent", "checked", "checked_sentences", "unchecked", "relay", "stdlib")
KEYED = ("chatagent", "checked", "checked_sentences")  # the servers that require a key
BENCH_KEY = "bench-key"  # bench/_serve_targets.py: the key the chatagent target's clients send


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], deadline: float = 60) -> subprocess.Popen:
    """A helper process (default signal handling), once it has printed 'ready' (within `deadline` seconds)."""

    def restore() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=restore,
        cwd=ROOT,
    )  # fmt: skip
    ready, _, _ = select.select([proc.stdout], [], [], deadline)
    line = proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
    if line.strip() != "ready":
        stop(proc)
        raise RuntimeError(f"{Path(args[0]).name} {' '.join(args[1:])} did not start within {deadline:g} s: {line!r}")
    return proc


def stop(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    if proc.stdout:
        proc.stdout.close()


def wait_listening(port: int, deadline: float = 30) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def clients(port: int, n: int, chunks: int, key: str = "") -> dict:
    out = subprocess.run(
        [sys.executable, str(BENCH / "_serve_client.py"), f"http://127.0.0.1:{port}/v1", "bench", str(n), str(chunks)],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ, "BENCH_API_KEY": key},
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.splitlines()[-1])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(kind: str, upstream: str, n: int, chunks: int) -> dict:
    port = free_port()
    proc = start([str(BENCH / "_serve_targets.py"), kind, str(port), upstream])
    try:
        wait_listening(port)
        key = BENCH_KEY if kind in KEYED else ""
        warm = clients(port, 10, chunks, key)
        if warm["failed"]:
            raise RuntimeError(f"{kind}: the warm-up failed: {warm['errors']}")
        result = clients(port, n, chunks, key)
        result["rss"] = peak_rss_mb(proc.pid)
    finally:
        stop(proc)
    result["chunks_per_s"] = result["chunks"] / result["wall"]
    result["streams_per_s"] = result["completed"] / result["wall"]
    return result


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


def ratio(ours: float | None, theirs: float | None, higher_is_better: bool) -> str:
    if not ours or not theirs:
        return "n/a"
    r = ours / theirs if higher_is_better else theirs / ours
    return f"{r:.2f}x {'ahead' if r >= 1 else 'behind'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=100, help="content chunks per answer")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between the upstream's chunks")
    parser.add_argument("--quick", action="store_true", help="100 clients")
    parser.add_argument("--only", choices=TARGETS, action="append", help="measure only these servers")
    args = parser.parse_args()
    n = 100 if args.quick else args.clients
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < 4 * n + 100:
        show("serve_note", f"the file-descriptor limit ({hard}) may be too low for {n} clients")
    label = f"serve_{n}_streams_{args.chunks}_chunks"
    show(f"{label}_setup", f"upstream chunk every {args.interval * 1000:g} ms, {os.cpu_count()} cores, loopback")
    up_port = free_port()
    upstream = start([str(BENCH / "_sse_upstream.py"), str(up_port), str(args.chunks), str(args.interval)])
    results: dict[str, dict] = {}
    try:
        for kind in args.only or TARGETS:
            results[kind] = r = measure(kind, f"http://127.0.0.1:{up_port}/v1", n, args.chunks)
            show(
                f"{label}_{kind}",
                f"completed {r['completed']}/{n}, ttfc p50 {ms(r['ttfc_p50'])} p99 {ms(r['ttfc_p99'])}, "
                f"{r['chunks_per_s']:.0f} chunks/s, {r['streams_per_s']:.1f} streams/s, peak RSS {r['rss']:.0f} MB"
                + (f", errors {r['errors']}" if r["failed"] else ""),
            )
    finally:
        stop(upstream)
    ours = results.get("chatagent")
    if ours is None:
        return
    for kind, what in (("checked", "whole answer"), ("checked_sentences", "per sentence")):
        r = results.get(kind)
        if r is not None:  # an output check holds the text until it passed: the first chunk comes later
            show(
                f"{label}_output_check_{kind.removeprefix('checked').strip('_') or 'answer'}",
                f"{what}: {r['streams_per_s']:.1f} streams/s, ttfc p50 {ms(r['ttfc_p50'])} p99 {ms(r['ttfc_p99'])}; "
                f"without output checks {ours['streams_per_s']:.1f} streams/s, ttfc p50 {ms(ours['ttfc_p50'])} "
                f"p99 {ms(ours['ttfc_p99'])}",
            )
    for kind in ("unchecked", "relay", "stdlib"):
        ref = results.get(kind)
        if ref is None:
            continue
        show(
            f"{label}_chatagent_vs_{kind}",
            f"chunks/s {ratio(ours['chunks_per_s'], ref['chunks_per_s'], True)}"
            + (" (goal >= 0.7x)" if kind == "relay" else "")
            + f", ttfc p50 {ratio(ours['ttfc_p50'], ref['ttfc_p50'], False)}"
            + f", ttfc p99 {ratio(ours['ttfc_p99'], ref['ttfc_p99'], False)}"
            + f", peak RSS {ratio(ours['rss'], ref['rss'], False)}"
            + f", completed {ours['completed']} vs {ref['completed']}",
        )


def per_call_us(fn: object, n: int) -> float:
    """Microseconds per call of `fn()` (the best of three runs of `n` calls)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def check_costs() -> None:
    """The per-request cost of the identity and ownership checks, in this process, beside what they replaced."""
    import hashlib
    import hmac
    import tempfile

    from chatagent.schema import Message
    from chatagent.server.conversations import Quotas, open_conversation
    from chatagent.server.identity import Principals
    from chatagent.server.openai_api import ChatRequest
    from chatagent.sessions import Session, close_stores, open_store
    from chatagent.utils.origins import HostCheck

    headers = {b"authorization": b"Bearer " + BENCH_KEY.encode(), b"host": b"127.0.0.1:8000"}
    keys = Principals(["bench-key-other", BENCH_KEY])
    one_key = hashlib.sha256(BENCH_KEY.encode()).digest()

    def before() -> None:  # main's check: one key, one digest compared
        hmac.compare_digest(hashlib.sha256(headers[b"authorization"][7:]).digest(), one_key)

    check = HostCheck("127.0.0.1")

    def identity() -> None:
        keys.of(headers)
        check.refusal("127.0.0.1:8000", "http://127.0.0.1:8000")

    show("serve_check_identity_and_origin_us", f"{per_call_us(identity, 20000):.2f} per request (2 keys, Host and "
         f"Origin checked); main's one-key check {per_call_us(before, 20000):.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/s.db")
        Session("conv", store, user="key:bench").append([{"role": "user", "content": "hi"}])
        request = ChatRequest([Message("user", "next")], True, False, None, "conv")
        quotas = Quotas()
        owned = per_call_us(lambda: open_conversation(store, "key:bench", "conv", request, 100, quotas), 2000)
        bound = per_call_us(lambda: Session("conv", store, user="key:bench"), 2000)
        show("serve_check_ownership_us", f"{owned:.1f} per request with a session_id (owner's row, size quota; "
             f"SQLite); binding a Session as main did {bound:.1f}")  # fmt: skip
        close_stores()


if __name__ == "__main__":
    main()
    check_costs()
