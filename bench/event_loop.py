"""How long new agents block the event loop under `arun()`, against the loopback OpenAI-compatible server.

    .venv/bin/python bench/event_loop.py

Each scenario runs in a fresh interpreter (so the first agent is the first of its process), with the loopback
server (bench/_loopback.py) in a process of its own:

- `first_step_ms`: the longest the loop was blocked at once (the longest gap between two turns of a task that
  only yields) while a new agent made its first `arun()` call; `cold` is the first agent of the process, `warm`
  the worst of 20 new agents after it. Goal (issue 31): < 1 ms.
- `fifty_new_agents_stall_ms`: how late a 10 ms heartbeat (`asyncio.sleep(0.01)`) woke, at worst, while 50 new
  agents made their first call at once. Goal: < 50 ms.
- `fifty_tool_agents_stall_ms`: the same while 50 new `FnCallAgent`s (20 tools each) ran at once, each a tool
  round trip (the model calls a tool, it runs, its result goes back, the model answers: two requests). Goal
  (issue 43.20): < 50 ms. Its reference is the bare loop: one shared `httpx.AsyncClient` posting the same two
  requests per agent.

Each is given twice: `_cpu`, counted in the CPU time of the loop's thread (the work the loop itself did: what a
busy machine does not change), and `_wall`, in wall time (what a user sees, but on a shared machine it also
holds the time other processes had the core).

References, measured in the same run: an idle loop (the same heartbeat or spinner while the work only sleeps:
the loop's and the machine's own jitter, the floor), and the same with a new `httpx.AsyncClient` per agent on the
loop (what each model instance did before: a client, so an SSL context, of its own).

    .venv/bin/python bench/event_loop.py --only fifty_tools     # one scenario (first_step, fifty, fifty_tools)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import lookup_functions  # noqa: E402

MESSAGES = [{"role": "user", "content": "hi"}]
WARM_AGENTS = 20
CONCURRENT = 50
IDLE_SECONDS = 0.05  # how long an idle "agent" sleeps (about a loopback first call's length)
TOOL_MODEL = "tools-1"  # bench/_loopback.py: a call of lookup_0, then once it has its result, the final answer
TOOL_QUESTION = [{"role": "user", "content": "Please look this up for me."}]
TOOLS = lookup_functions(20)  # defined once, as a program defines its tools; each agent makes its own of them
_shared: list[Any] = []  # the bare tool loop's one client


async def _tool_run(url: str, how: str) -> None:
    """A new FnCallAgent's tool round trip to the end (`how` == 'agent'), or the bare loop's: the same two requests
    (the second with the call and its result) on one shared httpx.AsyncClient."""
    if how == "idle":
        await asyncio.sleep(IDLE_SECONDS * 2)
        return
    tools = TOOLS
    if how == "agent":
        from chatagent import FnCallAgent

        bot = FnCallAgent(llm={"model": TOOL_MODEL, "model_server": url, "api_key": "k"}, function_list=tools)
        reply = await bot.arun_nonstream(TOOL_QUESTION)
        assert reply[-1]["content"], reply
        return
    import httpx

    if not _shared:
        _shared.append(httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=5.0)))
    schemas = [{"type": "function", "function": {"name": t.__name__, "description": "Look something up.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}} for t in tools]  # fmt: skip
    messages: list[dict[str, Any]] = list(TOOL_QUESTION)
    for _ in range(2):
        body = {"model": TOOL_MODEL, "messages": messages, "tools": schemas, "stream": True}
        async with _shared[0].stream("POST", url + "/chat/completions", json=body) as response:
            raw = b"".join([chunk async for chunk in response.aiter_bytes()])
        if b"tool_calls" not in raw:
            return
        call = {"id": "c0", "type": "function", "function": {"name": "lookup_0", "arguments": "{}"}}
        messages = [*messages, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c0", "content": tools[0](query="x")}]  # fmt: skip


async def _first_call(url: str, how: str) -> None:
    """A new agent's first arun() to the end (`how` == 'agent'), or the reference: a new httpx client posting the
    same request and reading the stream."""
    if how == "idle":  # the floor: the loop does nothing but the measuring task while this sleeps
        await asyncio.sleep(IDLE_SECONDS)
        return
    if how == "agent":
        from chatagent import BasicAgent

        bot = BasicAgent(llm={"model": "stream-4", "model_server": url, "api_key": "k"})
        async for _ in bot.arun(MESSAGES):
            pass
        return
    import httpx

    client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=5.0))
    body = {"model": "stream-4", "messages": MESSAGES, "stream": True}
    async with client.stream("POST", url + "/chat/completions", json=body) as response:
        async for _ in response.aiter_bytes():
            pass


async def _longest_block(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """The longest gap between two turns of a task that does nothing but yield, while `work()` runs: in wall
    time, and in the CPU time of the loop's thread (what the loop itself did; a busy machine does not add to it)."""
    longest = [0.0, 0.0]  # only the longest kept: a list of every gap would grow by the million and its
    done = asyncio.Event()  # allocations (and the collector's passes over them) would be the pauses measured

    async def spin() -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0)
            now_wall, now_cpu = time.perf_counter(), time.thread_time()
            longest[0] = max(longest[0], now_wall - wall)
            longest[1] = max(longest[1], now_cpu - cpu)
            wall, cpu = now_wall, now_cpu

    spinner = asyncio.create_task(spin())
    await asyncio.sleep(0)
    try:
        await work()
    finally:
        done.set()
        await spinner
    return longest[0], longest[1]


async def _heartbeat_stall(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """How late, at worst, a 10 ms heartbeat woke while `work()` ran: in wall time, and as the CPU time the loop's
    thread spent during one beat beyond its 10 ms (what the loop itself did; a busy machine does not add to it)."""
    late: list[tuple[float, float]] = []
    done = asyncio.Event()
    started = asyncio.Event()

    async def beat() -> None:
        while not done.is_set():
            wall, cpu = time.perf_counter(), time.thread_time()
            started.set()
            await asyncio.sleep(0.01)
            late.append((time.perf_counter() - wall - 0.01, max(0.0, time.thread_time() - cpu - 0.01)))

    beater = asyncio.create_task(beat())
    await started.wait()  # the heartbeat is running before the work starts
    try:
        await work()
    finally:
        done.set()
        await beater
    return max(x[0] for x in late), max(x[1] for x in late)


async def _scenario(name: str, url: str, how: str) -> dict[str, float]:
    import httpx  # noqa: F401

    import chatagent.agents.basic  # noqa: F401  (imports are not the loop's work: done before measuring)
    import chatagent.agents.fncall  # noqa: F401

    if name == "first_step":
        cold = await _longest_block(lambda: _first_call(url, how))
        warm = [await _longest_block(lambda: _first_call(url, how)) for _ in range(WARM_AGENTS)]
        return {
            "cold": cold[0],
            "cold_cpu": cold[1],
            "warm": max(w[0] for w in warm),
            "warm_cpu": max(w[1] for w in warm),
        }
    run = _tool_run if name == "fifty_tools" else _first_call
    wall, cpu = await _heartbeat_stall(lambda: asyncio.gather(*(run(url, how) for _ in range(CONCURRENT))))
    return {"stall": wall, "stall_cpu": cpu}


def _child(name: str, url: str, how: str) -> None:
    print(json.dumps(asyncio.run(_scenario(name, url, how))))


def _run(name: str, url: str, how: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, url, how], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


SCENARIOS = ("first_step", "fifty", "fifty_tools")
REFERENCE = {"first_step": "new httpx.AsyncClient per agent", "fifty": "new httpx.AsyncClient per agent",
             "fifty_tools": "bare loop on one httpx.AsyncClient"}  # fmt: skip


def main(only: str | None) -> None:
    from peers import Loopback

    names = [only] if only else list(SCENARIOS)
    server = Loopback()
    try:
        best: dict[tuple[str, str], dict[str, float]] = {}
        for _ in range(3):  # the best of three fresh processes: a shared machine's noise only adds
            for name in names:
                for how in ("agent", "idle", "bare"):
                    got = _run(name, server.url, how)
                    prev = best.setdefault((name, how), got)
                    for k, v in got.items():
                        prev[k] = min(prev[k], v)
    finally:
        server.close()
    labels = {"first_step": "first_step_ms", "fifty": "fifty_new_agents_stall_ms",
              "fifty_tools": "fifty_tool_agents_stall_ms"}  # fmt: skip
    for name, key, goal in (("first_step", "cold", 1), ("first_step", "warm", 1), ("fifty", "stall", 50),
                            ("fifty_tools", "stall", 50)):  # fmt: skip
        if name not in names:
            continue
        ours, idle, ref = best[(name, "agent")], best[(name, "idle")], best[(name, "bare")]
        label = f"{labels[name]}_{key}" if name == "first_step" else labels[name]
        for clock in ("cpu", "wall"):
            k = f"{key}_cpu" if clock == "cpu" else key
            print(
                f"{label}_{clock}: {ours[k] * 1e3:.2f} (idle loop: {idle[k] * 1e3:.2f}; "
                f"{REFERENCE[name]}: {ref[k] * 1e3:.2f}; goal < {goal})"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("SCENARIO", "URL", "HOW"), help="(internal) one scenario")
    parser.add_argument("--only", choices=SCENARIOS, help="run this scenario only")
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
    else:
        main(args.only)
