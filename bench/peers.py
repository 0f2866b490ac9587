"""chatagent beside every peer framework: the same workloads against the same loopback server, in one run.

    .venv/bin/python bench/peers.py [--quick] [--peers pydantic_ai,langchain,...] [--no-peers]

Peers, pinned, each in its own offline venv under the bench cache (made once by bench/_peers.py): pydantic-ai,
LangChain `create_agent` (LangGraph), the OpenAI Agents SDK, smolagents, CrewAI. The reference floor is the bare
relay: httpx + json with no framework. Each framework runs bench/_peer_run.py in its own process with its adapter
(bench/_peer_<name>.py), against one loopback OpenAI-compatible server in a process of its own
(bench/_loopback.py), so that no one's CPU time counts the server's. A peer that cannot be installed or run
prints why instead of its figures.

(a) import time of what a script needs to build the agent over an OpenAI-compatible server (fresh interpreter).
(b) a 16k-chunk answer streamed through the agent, synchronously (`run()`; each peer's sync streaming API), wall
    and CPU time beside the bare relay's; per-chunk overhead = (CPU time - the bare relay's) / 16k.
(c) the same on asyncio (`arun()`; each peer's async streaming API) beside a bare httpx.AsyncClient.
(d) tool round trip with 20 tools: runs of 5 round trips (the model calls a tool, it runs, its result goes
    back) and a final answer, each framework's own tool-calling agent, per round trip; synchronously and on
    asyncio (FnCallAgent.run_nonstream / arun_nonstream; each peer's sync and async run).
(e) N concurrent streaming runs in one process (N = 100, 1,000), each a 20-chunk answer that lasts about a
    second: wall time, p50/p99 time to first chunk from the common start, how many completed, peak RSS.
    Goal (issue 14): chatagent's p99 <= 3x the bare relay's at N = 1,000. smolagents has no async API, so no
    async figures. A second floor, `bare_pools`: the
    bare relay over chatagent's small connection pools (one httpcore pool's bookkeeping grows with the square of
    its streams, which the plain bare relay pays at N = 1,000).

Every peer line ends with `chatagent/<peer> <ratio>x` (below 1: chatagent is ahead; lower is better for every
figure). CPU time is the steadier figure on a shared machine; each is the best of a few interleaved rounds.
"""

from __future__ import annotations

import argparse
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _measure import show  # noqa: E402
from _peers import PEERS  # noqa: E402
from _venv import ReferenceUnavailable, run_script  # noqa: E402

OURS = "chatagent"
BARE = "bare"
BARE_POOLS = "bare_pools"  # the bare relay over chatagent's small connection pools: the floor for concurrency
ALL_PEERS = list(PEERS)
CHUNKS = 16000


class Loopback:
    """bench/_loopback.py in a child process: `url` while it runs."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "_loopback.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"the loopback server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()  # the server's signal to end
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(name: str, *args: str, timeout: float = 1200.0) -> dict | str:
    """One workload of one framework: its JSON result, or why it is missing."""
    try:
        if name in (OURS, BARE, BARE_POOLS):
            return run_script(sys.executable, "_peer_run.py", name, *args, timeout=timeout)
        return PEERS[name].run("_peer_run.py", name, *args, timeout=timeout)
    except (ReferenceUnavailable, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        text = str(exc).strip().splitlines()
        return f"missing: {text[-1] if text else type(exc).__name__}"[:600]


def best_of(names: list[str], rounds: int, *args: str, keys: tuple[str, ...] = ()) -> dict[str, dict | str]:
    """Each framework's result over `rounds` interleaved rounds: the lowest value of each of `keys`."""
    out: dict[str, dict | str] = {}
    for _ in range(rounds):
        for name in names:
            result = measure(name, *args)
            prev = out.get(name)
            if isinstance(result, dict) and isinstance(prev, dict) and "missing" not in result:
                if keys:
                    for key in keys:
                        prev[key] = min(prev[key], result[key])
                elif (result.get("wall_s") or 0) < (prev.get("wall_s") or 0):  # the best round, whole
                    out[name] = result
            elif not isinstance(prev, dict):
                out[name] = result
    return out


def label(name: str, result: dict | str) -> str:
    return result.get("version") or name if isinstance(result, dict) else name


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs <= 0:
        return "n/a"
    return f"{ours / theirs:.3g}x"


def report(figure: str, results: dict[str, dict | str], keys: list[tuple[str, str]], more: Any = None) -> None:
    """One line per framework: its value of each (key, format), and chatagent/that one (for chatagent: beside the
    bare relay's)."""
    ours = results.get(OURS)
    for name, result in results.items():
        if not isinstance(result, dict):
            show(f"{figure}[{name}]", result)
            continue
        if "missing" in result:
            show(f"{figure}[{name}]", f"n/a: {label(name, result)} has {result['missing']}")
            continue
        values = ", ".join(fmt.format(result[k]) if result.get(k) is not None else "-" for k, fmt in keys)
        line = values + (more(result) if more else "")
        if name == OURS:
            ref = results.get(BARE)
            if isinstance(ref, dict) and "missing" not in ref:
                refs = ", ".join(fmt.format(ref[k]) if ref.get(k) is not None else "-" for k, fmt in keys)
                line += f"; bare relay {refs}, ratio {ratios(result, ref, keys)}"
        elif name != BARE and isinstance(ours, dict) and "missing" not in ours:
            line += f"; chatagent/{name} {ratios(ours, result, keys)}"
        show(f"{figure}[{name}]", f"{line} ({label(name, result)})")


def ratios(ours: dict, theirs: dict, keys: list[tuple[str, str]]) -> str:
    """ours/theirs for each key, named by its format's unit word if it has one (`0.5x wall, 0.4x cpu`)."""
    return ", ".join(
        f"{ratio(ours.get(k), theirs.get(k))}{fmt[fmt.rfind(' ') :] if ' ' in fmt else ''}" for k, fmt in keys
    )


def per_chunk(results: dict[str, dict | str], figure: str) -> None:
    """(CPU time - the bare relay's) / CHUNKS, in microseconds, beside chatagent's."""
    bare = results.get(BARE)
    if not isinstance(bare, dict) or "cpu_s" not in bare:
        return
    over = {
        name: (r["cpu_s"] - bare["cpu_s"]) / CHUNKS * 1e6
        for name, r in results.items()
        if isinstance(r, dict) and "cpu_s" in r and name != BARE
    }
    ours = over.get(OURS)
    for name, value in over.items():
        if name == OURS:
            show(f"{figure}[{name}]", f"{value:.2f} cpu over the bare relay's {bare['cpu_s'] / CHUNKS * 1e6:.2f}")
        elif ours is not None and ours <= 0:
            show(f"{figure}[{name}]", f"{value:.2f}; chatagent adds nothing measurable ({ours:.2f}): ahead")
        else:
            show(f"{figure}[{name}]", f"{value:.2f}; chatagent/{name} {ratio(ours, value)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round, fewer repeats, N = 100 only")
    parser.add_argument("--peers", default=",".join(ALL_PEERS), help="which peers (default: all)")
    parser.add_argument("--no-peers", action="store_true", help="chatagent and the bare relay only")
    args = parser.parse_args()
    peers = [] if args.no_peers else [p for p in args.peers.split(",") if p]
    unknown = set(peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")
    rounds, repeats, ns = (1, 1, [100]) if args.quick else (2, 3, [100, 1000])
    names = [BARE, OURS, *peers]
    for peer in peers:  # make the venvs first, so that installing does not run beside a measurement
        try:
            PEERS[peer].ensure()
        except ReferenceUnavailable as exc:
            show(f"venv[{peer}]", f"missing: {str(exc).strip().splitlines()[0]}")

    r = best_of(names, rounds, "import", "--repeats", str(3 * repeats), keys=("import_s",))
    report("a_import_s", r, [("import_s", "{:.3f}")])
    loopback = Loopback()
    clocks = [("wall_s", "{:.3f} wall"), ("cpu_s", "{:.3f} cpu")]
    clocks_ms = [("wall_ms", "{:.2f} wall"), ("cpu_ms", "{:.2f} cpu")]
    try:
        url = ["--url", loopback.url]
        for aio, fig, fig_chunk in (
            ("", "b_e2e_16k_sync_s", "b_per_chunk_sync_cpu_us"),
            ("--aio", "c_e2e_16k_async_s", "c_per_chunk_async_cpu_us"),
        ):
            e2e = ["e2e", *url, "--chunks", str(CHUNKS), "--repeats", str(repeats), *([aio] if aio else [])]
            r = best_of(names, rounds, *e2e, keys=("wall_s", "cpu_s"))
            report(fig, r, clocks)
            per_chunk(r, fig_chunk)
        for aio, fig in (("", "d_tool_round_trip_20_tools_ms"), ("--aio", "d_tool_round_trip_20_tools_async_ms")):
            loop = ["tools", *url, "--runs", str(4 * repeats), "--repeats", str(repeats), *([aio] if aio else [])]
            report(fig, best_of(names, rounds, *loop, keys=("wall_ms", "cpu_ms")), clocks_ms)
        for n in ns:
            concurrent = ("concurrent", *url, "--n", str(n), "--chunks", "20")
            concurrency_lines(n, best_of([BARE, BARE_POOLS, *names[1:]], rounds if n <= 100 else 1, *concurrent))
    finally:
        loopback.close()


def concurrency_lines(n: int, results: dict[str, dict | str]) -> None:
    def completed(x: dict) -> str:
        return f", {x['complete']}/{x['n']} complete" + (f" ({'; '.join(x['errors'])})" if x["errors"] else "")

    fig = f"e_concurrent_{n}"
    report(f"{fig}_wall_s", results, [("wall_s", "{:.2f}")], completed)
    report(f"{fig}_ttfc_p50_ms", results, [("ttfc_p50_ms", "{:.1f}")])
    report(f"{fig}_ttfc_p99_ms", results, [("ttfc_p99_ms", "{:.1f}")])
    report(f"{fig}_rss_mb", results, [("rss_mb", "{:.0f}")])


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    show("peers_bench_total_s", f"{time.perf_counter() - started:.0f}")
