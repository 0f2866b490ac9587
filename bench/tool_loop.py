"""The tool loop's own cost, and the argument parser's throughput, each beside a reference from the same run.

    .venv/bin/python bench/tool_loop.py [--quick] [--no-qwen-agent] [--no-http] [--peers langchain,...]

(a) framework time per tool round trip: FnCallAgent with 20 tools over ScriptedLLM, runs of 5 round
    trips (model asks for a tool, the tool runs, its result goes back) and a final answer. The model's
    share is measured by replaying the very same model calls on a fresh ScriptedLLM and subtracted; the
    tool is a no-op. CPU time of this process. Target: <= 1 ms per round trip.
    Also: with callbacks set, with a tool timeout (one thread per call), and 4 parallel calls per reply.
(b) argument parsing + validation throughput on a corpus of call strings as models write them (valid
    JSON, and malformed ones that need repair), beside json5.loads alone (Qwen-Agent's lenient parser)
    on the same strings.

(c) the tool round trip over loopback HTTP (bench/_loopback.py in a process of its own, 20 tools), in CPU
    instructions (cachegrind, which load does not change): a process doing a warm-up run and RUNS_HI runs less
    one doing the warm-up and one run, over the round trips between; chatagent's FnCallAgent (run_nonstream,
    arun_nonstream) beside the bare httpx loop sending the same requests (bench/_peer_bare.py), and the peers'
    own tool-calling agents (bench/_peers.py, each in its offline venv). Also a run of LONG_TRIPS round trips, the
    conversation growing to 80 messages: the cost of a trip stays flat as the conversation grows. Target
    (issue 43): <= 1.5x the bare loop, sync and async.

Qwen-Agent (pinned, in its own venv made once by bench/_qwen_agent.py) is measured in the same run, the same
way, by bench/qa_tool_loop.py (its FnCallAgent, 20 tools, its default <tool_call> prompt format; see there):
`qwen_agent=` beside our figure, then the ratio. It has no callbacks nor tool timeouts, so those have no reference.

Each figure is the best (lowest) of a few repeats, to damp the noise of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _qwen_agent  # noqa: E402
from _measure import best as best_on_clock  # noqa: E402
from _measure import lookup_functions, show  # noqa: E402
from _peers import PEERS  # noqa: E402
from _venv import ReferenceUnavailable, instructions  # noqa: E402

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call  # noqa: E402
from chatagent.tools.arguments import ToolArgumentError, parse_arguments, validate_arguments  # noqa: E402
from chatagent.tools.from_function import FunctionTool  # noqa: E402


def best(fn: Callable[[], object], repeats: int) -> float:
    """Lowest CPU time of `repeats` calls."""
    return best_on_clock(fn, repeats, time.process_time)


USER = [{"role": "user", "content": "Please look these up for me."}]
ROUND_TRIPS = 5


def make_tools(n: int = 20) -> list[FunctionTool]:
    return [tool(fn) for fn in lookup_functions(n)]


def script(parallel: int) -> list:
    replies: list = []
    for r in range(ROUND_TRIPS):
        calls = [tool_call(f"lookup_{(r + k) % 20}", {"query": f"item {r}-{k}", "limit": 3}) for k in range(parallel)]
        replies.append(calls if parallel > 1 else calls[0])
    replies.append("Here is what I found.")
    return replies


def round_trip_seconds(runs: int, repeats: int, parallel: int = 1, **agent_kwargs) -> tuple[float, float]:
    """(framework, total) seconds per round trip: total less the model's share, and total."""
    tools = make_tools()
    if agent_kwargs.pop("timeout", None):
        tools = [tool(t.fn, name=t.name, timeout=30) for t in tools]
    llms = [ScriptedLLM(script(parallel) * runs) for _ in range(repeats + 1)]
    agents = [FnCallAgent(llm=llm, function_list=tools, **agent_kwargs) for llm in llms]

    def loop(agent: FnCallAgent) -> Callable[[], None]:
        def go() -> None:
            for _ in range(runs):
                agent.run_nonstream(USER)

        return go

    loop(agents[-1])()  # warm up
    total = min(best(loop(a), 1) for a in agents[:repeats])
    # the model's share: the same calls replayed straight on a ScriptedLLM
    recorded = llms[0].calls
    items = script(parallel) * runs

    def replay() -> None:
        llm = ScriptedLLM(list(items))
        for call in recorded:
            for _ in llm.chat(call.messages, call.functions, stream=True, delta_stream=True):
                pass

    model = best(replay, repeats)
    return (total - model) / (runs * ROUND_TRIPS), total / (runs * ROUND_TRIPS)


# ---- (b) the parser -----------------------------------------------------------------------------------------

SCHEMA = make_tools(1)[0].parameters
VALID = [
    '{"query": "weather in Paris", "limit": 3}',
    '{"query": "北京天气", "limit": 5, "exact": true}',
    '{"query": "a longer query with some words in it, and punctuation: yes", "limit": 10, "exact": false}',
    '{"query": "x"}',
]
MALFORMED = [
    '```json\n{"query": "weather in Paris", "limit": 3}\n```',
    "{'query': 'weather in Paris', 'limit': 3, 'exact': True}",
    '{"query": "weather in Paris", "limit": "3",}',
    '{"query": "line one\nline two", "limit": 3}',
    '{"query": "weather in Par',
    '"{\\"query\\": \\"weather\\", \\"limit\\": 2}"',
]


def parse_rate(corpus: list[str], repeats: int, n: int) -> float:
    def go() -> None:
        for _ in range(n):
            for text in corpus:
                validate_arguments(parse_arguments(text), SCHEMA)

    return n * len(corpus) / best(go, repeats)


def json5_rate(corpus: list[str], repeats: int, n: int) -> float:
    import json5

    def go() -> None:
        for _ in range(n):
            for text in corpus:
                try:
                    json5.loads(text)
                except ValueError:
                    pass

    return n * len(corpus) / best(go, repeats)


def qwen_agent_reference(runs: int, repeats: int, n: int) -> dict | None:
    """Qwen-Agent's figures from bench/qa_tool_loop.py, or None after printing why they are missing."""
    spec = {"schema": SCHEMA, "runs": runs, "repeats": repeats, "round_trips": ROUND_TRIPS, "parse_n": n}
    spec.update(valid=VALID, malformed=MALFORMED)
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="qa-tool-loop-") as f:
        json.dump(spec, f)
        f.flush()
        result = _qwen_agent.reference("qa_tool_loop.py", f.name)
    if isinstance(result, str):
        show("qwen_agent_tool_loop", result)
        return None
    return result


def beside(ours: float, ref: dict | None, key: str) -> str:
    """`; qwen_agent=<ref>, ratio <ours/ref>x` (lower is better), or nothing without a reference."""
    return f"; qwen_agent={ref[key]:.0f}, ratio {ours / ref[key]:.3g}x" if ref else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-qwen-agent", action="store_true", help="skip the Qwen-Agent reference (its own venv)")
    ap.add_argument("--no-http", action="store_true", help="skip (c), the round trip over HTTP in instructions")
    ap.add_argument("--peers", default=",".join(PEERS), help="the peers of (c) (default: all; '' for none)")
    args = ap.parse_args()
    runs, repeats, n = (20, 2, 200) if args.quick else (100, 3, 1000)
    logging_off()
    qa = None if args.no_qwen_agent else qwen_agent_reference(runs, repeats, n)
    if args.no_qwen_agent:
        show("qwen_agent", "reference skipped (--no-qwen-agent)")

    us, total = (t * 1e6 for t in round_trip_seconds(runs, repeats))
    ref = qa["single"] if qa else None
    show("round_trip_framework_us (20 tools, target <= 1000)", f"{us:.0f}{beside(us, ref, 'framework_us')}")
    show("round_trip_total_us (framework + scripted model)", f"{total:.0f}{beside(total, ref, 'total_us')}")
    us_cb = round_trip_seconds(runs, repeats, callbacks=[lambda e: None])[0] * 1e6
    show("round_trip_framework_with_callbacks_us", f"{us_cb:.0f}")
    us_to = round_trip_seconds(runs, repeats, timeout=True)[0] * 1e6
    show("round_trip_framework_with_tool_timeout_us (a thread per call)", f"{us_to:.0f}")
    us_par, total_par = (t * 1e6 for t in round_trip_seconds(runs, repeats, parallel=4))
    ref = qa["parallel4"] if qa else None
    show("round_trip_framework_4_parallel_calls_us (per reply)", f"{us_par:.0f}{beside(us_par, ref, 'framework_us')}")
    show("round_trip_total_4_parallel_calls_us (per reply)", f"{total_par:.0f}{beside(total_par, ref, 'total_us')}")

    for label, corpus in (("valid", VALID), ("malformed", MALFORMED)):
        ours = parse_rate(corpus, repeats, n)
        ref_json5 = json5_rate(corpus, repeats, n)
        qa_rate = ""
        if qa:  # a rate: higher is better
            rate = qa["parse"][f"{label}_per_s"]
            qa_rate = f"; qwen_agent _verify_json_format_args={rate:,.0f}, ours is {ours / rate:.1f}x its rate"
        show(
            f"parse_validate_{label}_per_s",
            f"{ours:,.0f}  (json5.loads alone: {ref_json5:,.0f}, ratio {ours / ref_json5:.1f}x{qa_rate})",
        )
    bad = 0
    for text in MALFORMED:
        try:
            validate_arguments(parse_arguments(text), SCHEMA)
        except ToolArgumentError:
            bad += 1
    ref = f"  (qwen_agent accepts {qa['parse']['malformed_accepted']}/{len(MALFORMED)})" if qa else ""
    show("malformed_corpus_repaired", f"{len(MALFORMED) - bad}/{len(MALFORMED)}{ref}")
    if not args.no_http:
        peers = [p for p in args.peers.split(",") if p]
        http_round_trips([] if args.quick else peers)


# ---- (c) over loopback HTTP, in instructions ---------------------------------------------------------------

RUNS_HI = 3  # runs counted (beside the warm-up), less one
LONG_TRIPS = 40


def trip_instructions(name: str, url: str, aio: bool, trips: int = ROUND_TRIPS) -> float:
    """CPU instructions of one round trip of `name` (ours, the bare loop or a peer) over loopback HTTP."""
    python = sys.executable if name in ("chatagent", "bare") else PEERS[name].ensure()
    env = PEERS[name].env if name in PEERS else None
    args = [name, "count", "--url", url, "--trips", str(trips), *(["--aio"] if aio else [])]
    low = instructions(python, "_peer_run.py", *args, "--runs", "1", env=env)
    high = instructions(python, "_peer_run.py", *args, "--runs", str(RUNS_HI), env=env)
    return (high - low) / ((RUNS_HI - 1) * trips)


def http_round_trips(peers: list[str]) -> None:
    from peers import Loopback  # the loopback server's process (bench/peers.py runs it the same way)

    loopback = Loopback()
    try:
        for aio, how in ((False, "sync"), (True, "async")):
            bare = trip_instructions("bare", loopback.url, aio)
            ours = trip_instructions("chatagent", loopback.url, aio)
            show(f"http_round_trip_instructions_{how} (20 tools, target <= 1.5x bare)",
                 f"{ours / 1e6:.2f} M; bare httpx loop {bare / 1e6:.2f} M, ratio {ours / bare:.2f}x")  # fmt: skip
            bare_long = trip_instructions("bare", loopback.url, aio, LONG_TRIPS)
            ours_long = trip_instructions("chatagent", loopback.url, aio, LONG_TRIPS)
            show(f"http_round_trip_instructions_{how}_in_a_{LONG_TRIPS}_trip_run (flat: beside the 5-trip run's)",
                 f"{ours_long / 1e6:.2f} M ({ours_long / ours:.2f}x the 5-trip run's); bare {bare_long / 1e6:.2f} M "
                 f"({bare_long / bare:.2f}x), ratio {ours_long / bare_long:.2f}x")  # fmt: skip
            for peer in peers:
                try:
                    theirs = trip_instructions(peer, loopback.url, aio)
                except ReferenceUnavailable as exc:
                    show(f"http_round_trip_instructions_{how}[{peer}]", f"missing: {str(exc).strip()[-300:]}")
                    continue
                show(f"http_round_trip_instructions_{how}[{peer}]",
                     f"{theirs / 1e6:.2f} M ({PEERS[peer].label}); chatagent/{peer} {ours / theirs:.2f}x")  # fmt: skip
    except ReferenceUnavailable as exc:
        show("http_round_trip_instructions", f"not measured: {str(exc).strip()[-300:]}")
    finally:
        loopback.close()


def logging_off() -> None:
    import logging

    logging.getLogger("chatagent").setLevel(logging.ERROR)


if __name__ == "__main__":
    main()
