"""One framework's side of bench/peers.py, run in its own venv (ours for chatagent and the bare relay) with its
adapter, bench/_peer_<name>.py; prints one JSON line.

    python _peer_run.py NAME import --repeats 5
    python _peer_run.py NAME e2e --url URL --chunks 16000 --repeats 5 [--aio]
    python _peer_run.py NAME tools --url URL --runs 10 --repeats 3 [--aio]
    python _peer_run.py NAME concurrent --url URL --n 1000 --chunks 20
    python _peer_run.py NAME count --url URL --runs 4 [--aio] [--trips 5]   # under cachegrind: see below
    python _peer_run.py NAME first --url URL     # a fresh process's first answer (bench/first_run.py)

An adapter defines IMPORT (the statement whose time is measured in a fresh interpreter: what a script needs to
build that framework's agent over an OpenAI-compatible server) and, where the framework has them:
- `stream(url, model)`: a function doing one synchronous streaming run of one question, returning the text;
- `astream(url, model)`: an async generator function doing one run on the event loop, yielding the text's pieces;
- `tool_loop(url, tools)`: a function doing one run with `tools` (plain typed functions), returning the answer;
  `atool_loop(url, tools)`: the same as a coroutine function.
`count` does one warm-up tool run, then `runs` more, and times nothing: bench/tool_loop.py runs it under cachegrind
with two values of `runs`, whose difference is the instructions of the runs between, free of imports and set-up.
`--trips N` (chatagent and the bare relay: their adapters take a `model`) asks the server for N round trips a run
instead of 5, for the cost of a trip late in a long conversation.
What an adapter lacks is a figure the framework cannot give; the JSON says so. Each factory builds one agent,
reused by every run, as a service would. The server (bench/_loopback.py) picks its answer by the model name.
Times are wall clock and CPU time of this process (all its threads; the server is another process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import io
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import qa_common
from _measure import lookup_functions

qa_common.guard()

CHUNK = "tok "
ROUND_TRIPS = 5  # as bench/_loopback.py's `tools` answers
FINAL = "Here is what I found."
QUESTION = "Tell me a long story."
SLOW = 10.0  # seconds: a run this slow is measured once
CALLS: list[str] = []  # the tools called, to check that a run really ran them


def make_tools(n: int = 20) -> list[Callable[..., str]]:
    return lookup_functions(n, CALLS)


@contextlib.contextmanager
def quiet() -> Any:
    """The framework's own printing (progress, logs) goes nowhere: our JSON line is the only output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(best wall, best CPU) seconds of `repeats` calls; each call is timed on both clocks."""
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return min(walls), min(cpus)


def import_time(adapter: Any, repeats: int) -> dict:
    code = (
        "import qa_common; qa_common.guard(); import time; t = time.perf_counter(); "
        f"{adapter.IMPORT}; print(time.perf_counter() - t)"
    )
    times = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return {"import_s": min(times), "statement": adapter.IMPORT}


def e2e(adapter: Any, url: str, chunks: int, repeats: int, aio: bool) -> dict:
    model = f"stream-{chunks}"
    if aio:
        factory = getattr(adapter, "astream", None)
        if factory is None:
            return {"missing": "no async streaming API"}
        gen = factory(url, model)
        loop = asyncio.new_event_loop()

        async def drain() -> str:
            return "".join([piece async for piece in gen()])

        def run() -> str:
            return loop.run_until_complete(drain())

    else:
        factory = getattr(adapter, "stream", None)
        if factory is None:
            return {"missing": "no synchronous streaming API"}
        run = factory(url, model)
    with quiet():
        w, c = time.perf_counter(), time.process_time()
        text = run()  # warm up: imports, connections
        c, w = time.process_time() - c, time.perf_counter() - w
        if text.count(CHUNK) != chunks:
            raise AssertionError(f"the run streamed {text.count(CHUNK)} chunks of {chunks}: {text[:200]!r}")
        if w > SLOW:  # a framework that takes this long has measured itself (warm-up costs are small beside it)
            return {"wall_s": w, "cpu_s": c, "samples": 1}
        wall, cpu = timed(run, repeats)
    return {"wall_s": wall, "cpu_s": cpu, "samples": repeats}


def tools(adapter: Any, url: str, runs: int, repeats: int, aio: bool) -> dict:
    factory = getattr(adapter, "atool_loop" if aio else "tool_loop", None)
    if factory is None:
        return {"missing": "no async tool calling" if aio else "no tool calling"}
    run = factory(url, make_tools())
    if aio:
        loop = asyncio.new_event_loop()
        arun = run
        run = lambda: loop.run_until_complete(arun())  # noqa: E731
    with quiet():
        CALLS.clear()
        answer = run()
        if FINAL not in str(answer) or len(CALLS) != ROUND_TRIPS:
            raise AssertionError(f"a tool run called {CALLS} and answered {str(answer)[:200]!r}")

        def many() -> None:
            for _ in range(runs):
                run()

        wall, cpu = timed(many, repeats)
    per = runs * ROUND_TRIPS
    return {"wall_ms": wall / per * 1e3, "cpu_ms": cpu / per * 1e3, "tools": 20, "round_trips": ROUND_TRIPS}


def count(adapter: Any, url: str, runs: int, aio: bool, trips: int) -> dict:
    """One warm-up tool run and `runs` more, untimed (the instructions are counted from outside)."""
    factory = getattr(adapter, "atool_loop" if aio else "tool_loop", None)
    if factory is None:
        return {"missing": "no async tool calling" if aio else "no tool calling"}
    run = factory(url, make_tools(), model=f"tools-{trips}") if trips != ROUND_TRIPS else factory(url, make_tools())
    if aio:
        loop = asyncio.new_event_loop()
        arun = run
        run = lambda: loop.run_until_complete(arun())  # noqa: E731
    with quiet():
        for _ in range(runs + 1):
            CALLS.clear()
            answer = run()
            if FINAL not in str(answer) or len(CALLS) != trips:
                raise AssertionError(f"a tool run called {CALLS} and answered {str(answer)[:200]!r}")
    return {"runs": runs, "round_trips": trips}


def first(adapter: Any, url: str, chunks: int) -> dict:
    """This process's first streamed answer of `chunks` chunks, right after importing the framework: the CPU time of
    the whole process (interpreter start, imports, the agent made, the answer)."""
    factory = getattr(adapter, "stream", None)
    if factory is None:
        return {"missing": "no synchronous streaming API"}
    with quiet():
        text = factory(url, f"stream-{chunks}")()
    if text.count(CHUNK) != chunks:
        raise AssertionError(f"the run streamed {text.count(CHUNK)} chunks of {chunks}: {text[:200]!r}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": usage.ru_utime + usage.ru_stime}


def concurrent(adapter: Any, url: str, n: int, chunks: int) -> dict:
    """n runs at once on one event loop: wall time, time to each run's first chunk (from the common start),
    how many streamed the whole text, the peak RSS of this process."""
    factory = getattr(adapter, "astream", None)
    if factory is None:
        return {"missing": "no async streaming API"}
    gen = factory(url, f"live-{chunks}")

    async def main() -> dict:
        async for _ in gen():  # warm up: imports, the first connection
            pass
        first: list[float | None] = [None] * n
        complete = [False] * n
        start = time.perf_counter()

        async def one(i: int) -> None:
            got = 0
            async for piece in gen():
                if piece and first[i] is None:
                    first[i] = time.perf_counter() - start
                got += piece.count(CHUNK)
            complete[i] = got == chunks

        results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
        wall = time.perf_counter() - start
        errors = sorted({f"{type(r).__name__}: {r}"[:300] for r in results if isinstance(r, BaseException)})
        ttfc = sorted(t for t in first if t is not None)
        return {
            "n": n,
            "chunks": chunks,
            "wall_s": wall,
            "complete": sum(complete),
            "ttfc_p50_ms": statistics.median(ttfc) * 1e3 if ttfc else None,
            "ttfc_p99_ms": ttfc[min(len(ttfc) - 1, int(len(ttfc) * 0.99))] * 1e3 if ttfc else None,
            "errors": errors[:3],
        }

    with quiet():
        result = asyncio.run(main())
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("what", choices=["import", "e2e", "tools", "count", "first", "concurrent"])
    parser.add_argument("--url")
    parser.add_argument("--chunks", type=int, default=16000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--aio", action="store_true")
    parser.add_argument("--trips", type=int, default=ROUND_TRIPS)
    args = parser.parse_args()
    adapter = importlib.import_module(f"_peer_{args.name}")  # the framework's import: counted by `first`
    if args.what == "import":
        result = import_time(adapter, args.repeats)
    elif args.what == "e2e":
        result = e2e(adapter, args.url, args.chunks, args.repeats, args.aio)
    elif args.what == "tools":
        result = tools(adapter, args.url, args.runs, args.repeats, args.aio)
    elif args.what == "count":
        result = count(adapter, args.url, args.runs, args.aio, args.trips)
    elif args.what == "first":
        result = first(adapter, args.url, args.chunks)
    else:
        result = concurrent(adapter, args.url, args.n, args.chunks)
    result["version"] = getattr(adapter, "version", lambda: "")()
    qa_common.emit(result)


if __name__ == "__main__":
    main()
