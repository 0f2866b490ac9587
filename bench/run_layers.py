"""What the layers of a run cost in CPU instructions: per streamed chunk and per tool round trip, each beside the
plain run measured in the same bench run. Instructions (cachegrind) do not change with the machine's load, so two
commits compare within noise; the plain run is the reference.

    .venv/bin/python bench/run_layers.py [--only chunk|trip] [--variant NAME ...]

(a) per streamed chunk: an answer of N chunks (ScriptedLLM, in process) run to its end in delta mode, 2100 chunks
    less 100, over 2000: `plain` (BasicAgent), `plugins` (the 3 plugins of control_overhead.py: an input redaction,
    an output length policy that holds the answer, model and tool hooks), `session` (on SQLite: the turn
    checkpointed and stored), `subagent` (a Router handing the question to a member), `qwen_style` (a `_run` written
    the Qwen-Agent way: the whole response so far each chunk), `async` (`arun()`).
(b) per tool round trip (a model reply with a call, the call, its result): a FnCallAgent turn of 22 calls less one
    of 2, over 20: `plain`, `plugins`, `session`, `async`.

Each count is a child process under valgrind's cachegrind: three runs after a warm-up, with what the warm-up left
frozen out of the garbage collector's way. Without valgrind it says so and measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _measure import show  # noqa: E402
from control_overhead import three_plugins  # noqa: E402

from chatagent import Agent, BasicAgent, FnCallAgent, Reply, Router, ScriptedLLM, Session, tool_call  # noqa: E402

USER = [{"role": "user", "content": "What is the weather in Oslo?"}]
CHUNK = "tok "
CHUNKS = (100, 2100)
CALLS = (2, 22)
RUNS = 3
CHUNK_VARIANTS = ("plain", "plugins", "session", "subagent", "qwen_style", "async")
TRIP_VARIANTS = ("plain", "plugins", "session", "async")


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class QwenStyle(Agent):
    """A `_run` written the Qwen-Agent way: it yields the whole response so far."""

    def _run(self, messages: Any, lang: str = "en", **kwargs: Any) -> Iterator[Any]:
        for output in self._call_llm(messages):
            if output:
                yield output


def _drained(run: Callable[[], Any]) -> Callable[[], None]:
    def go() -> None:
        for _ in run():
            pass

    return go


def _async_drained(run: Callable[[], Any]) -> Callable[[], None]:
    async def main() -> None:
        async for _ in run():
            pass

    return lambda: asyncio.run(main())


def chunk_run(variant: str, n: int, directory: str) -> Callable[[], None]:
    """One run of an answer of `n` chunks, as `variant` runs it."""
    reply = Reply(chunks=[CHUNK] * n)
    llm = ScriptedLLM(default=reply)
    if variant == "subagent":
        member = BasicAgent(llm=llm, name="helper", description="answers")
        bot: Agent = Router(llm=ScriptedLLM(default="Call: helper"), agents=[member])
    elif variant == "qwen_style":
        bot = QwenStyle(llm=llm)
    else:
        bot = BasicAgent(llm=llm, plugins=three_plugins() if variant == "plugins" else None)
    if variant == "async":
        return _async_drained(lambda: bot.arun(USER, delta_stream=True))
    if variant == "session":
        turns = iter(range(1_000_000))
        url = f"sqlite:///{directory}/chunks.db"
        return _drained(lambda: bot.run(USER, delta_stream=True, session=Session(f"s{next(turns)}", url)))
    return _drained(lambda: bot.run(USER, delta_stream=True))


def trip_run(variant: str, calls: int, directory: str) -> Callable[[], None]:
    """One turn of `calls` tool round trips, as `variant` runs it."""
    script = [tool_call("lookup", {"key": f"k{i}"}) for i in range(calls)] + ["All looked up."]
    plugins = three_plugins() if variant == "plugins" else None
    turns = iter(range(1_000_000))
    url = f"sqlite:///{directory}/trips.db"

    def bot() -> FnCallAgent:
        return FnCallAgent(function_list=[lookup], llm=ScriptedLLM(list(script)), max_llm_calls=calls + 1,
                           plugins=plugins)  # fmt: skip

    if variant == "async":
        return _async_drained(lambda: bot().arun(USER))
    if variant == "session":
        return _drained(lambda: bot().run(USER, session=Session(f"t{next(turns)}", url)))
    return _drained(lambda: bot().run(USER))


def count(kind: str, variant: str, size: int, directory: str) -> None:
    """What `--count` does in a child under cachegrind: RUNS runs after a warm-up."""
    fn = (chunk_run if kind == "chunk" else trip_run)(variant, size, directory)
    fn()
    fn()
    gc.collect()
    gc.freeze()
    for _ in range(RUNS):
        fn()


def instructions(kind: str, variant: str) -> float | None:
    """Instructions per chunk or per round trip of `variant` (None without valgrind)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    sizes = CHUNKS if kind == "chunk" else CALLS
    counts = []
    with tempfile.TemporaryDirectory(dir=ROOT) as disk:
        for size in sizes:
            cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
                   __file__, "--count", kind, variant, str(size), disk]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0"}
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800, env=env)
            found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
            if found is None:
                raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
            counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (RUNS * (sizes[1] - sizes[0]))


def report(kind: str, variants: tuple[str, ...]) -> None:
    what = "streamed chunk" if kind == "chunk" else "tool round trip"
    plain = instructions(kind, "plain")
    if plain is None:
        show(f"{kind}_instructions", "not measured (valgrind is not installed)")
        return
    show(f"{kind}_plain_instructions", f"{plain:,.0f} per {what} (the reference)")
    for v in variants:
        if v == "plain":
            continue
        n = instructions(kind, v)
        assert n is not None
        show(f"{kind}_{v}_instructions", f"{n:,.0f} per {what} ({n - plain:+,.0f} beside the plain run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("chunk", "trip"), help="measure one of the two")
    parser.add_argument("--variant", nargs="+", help="measure only these variants (and the plain run)")
    parser.add_argument("--count", nargs=4, metavar=("KIND", "VARIANT", "SIZE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:  # a child of `instructions`, under cachegrind
        count(args.count[0], args.count[1], int(args.count[2]), args.count[3])
        return
    for kind, variants in (("chunk", CHUNK_VARIANTS), ("trip", TRIP_VARIANTS)):
        if args.only in (None, kind):
            report(kind, tuple(v for v in variants if not args.variant or v in args.variant))


if __name__ == "__main__":
    main()
