"""What plugins, tracing and the response cache cost, each beside the same run without them, measured in this run.

    .venv/bin/python bench/control_overhead.py [--quick]

(a) per model call: a BasicAgent run (one model call, 8 chunks) and a FnCallAgent run (two model calls and a
    tool) over ScriptedLLM, without plugins (the reference) and with 3 plugins (an input redaction, an output
    length policy, and a plugin with before/after model and tool hooks); the difference per model call.
    Goal: <= 50 us per model call.
(b) the same with tracing on (`chatagent.telemetry.instrument` to an SDK TracerProvider whose batch processor
    drops the spans): spans for the run, each model call and each tool call. Goal: <= 50 us per model call. It is
    split into the SDK's part and ours: the SDK's is the same SDK calls our tracing makes for the run's spans (same
    arguments and attributes), replayed right after each untraced run (where it is paid: the run and the SDK share
    the CPU's caches; beside it, one span in a loop alone); ours (goal <= 5 us) is the rest: with tracing minus
    without minus the SDK's, itself split into an observed run's cost (a callback that takes the event tracing
    takes, run_start, and does nothing) and our tracing. Then the cost when a sampler of the SDK keeps no trace (ParentBased(TraceIdRatioBased(0)))
    and when chatagent's own sampling leaves the run out (`instrument(sample=...)`).
(c) a 16k-chunk answer through BasicAgent: reference without anything, then with the 3 plugins, with tracing,
    and with both. Goal: <= 5 % of the stream.
(d) the response cache: a 16k-chunk answer from the loopback OpenAI-compatible server (the reference) beside the
    same answer replayed from the cache (SQLite), through BasicAgent.
(e) (b)'s split into ours and the SDK's in CPU instructions, which a busy machine does not change (when valgrind
    is installed): the reference, the traced run and the SDK's replay beside it, each under cachegrind with 10 and
    then 210 runs after a warm-up, the difference over 200; in us at the rate the reference ran at in (a) (its CPU
    time over its instructions: a busy machine slows that rate, so these us err high).

Times are CPU time of this process (other processes on a shared machine do not count), the best of interleaved
repeats (in a and b, each variant's batch of runs in turn with the others').
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _measure import best, show  # noqa: E402

from chatagent import BasicAgent, FnCallAgent, Plugin, Reply, ScriptedLLM, get_chat_model, tool, tool_call  # noqa: E402
from chatagent.plugins.guardrails import TextPolicy  # noqa: E402

USER = [{"role": "user", "content": "My key is sk-abcdefghijklmnopqrstuvwx. What is the weather in Oslo?"}]
CHUNK = "tok "


class Hooks(Plugin):
    """A plugin that looks at every model call and tool call (and changes nothing)."""

    def before_model(self, agent, call):
        self.n = len(call.messages)

    def after_model(self, agent, call, reply):
        self.m = len(reply)

    def before_tool(self, agent, call):
        self.t = call.tool.name

    def after_tool(self, agent, outcome):
        self.o = outcome.error


def three_plugins() -> list:
    return [TextPolicy(redact=[r"sk-[A-Za-z0-9]{20,}"], on="input"), TextPolicy(max_chars=100_000), Hooks()]


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return "sunny"


def basic(plugins: list | None) -> Callable[[], object]:
    bot = BasicAgent(llm=ScriptedLLM(default=Reply(text="It is sunny in Oslo today, as usual.")), plugins=plugins)
    return lambda: bot.run_nonstream(USER)


def with_tool(plugins: list | None) -> Callable[[], object]:
    def reply(messages, functions):
        return "Sunny." if messages[-1].role == "function" else tool_call("weather", {"city": "Oslo"})

    bot = FnCallAgent(llm=ScriptedLLM(default=reply), function_list=[weather], plugins=plugins)
    return lambda: bot.run_nonstream(USER)


def per_run_us(fn: Callable[[], object], runs: int, repeats: int) -> float:
    def batch() -> None:
        for _ in range(runs):
            fn()

    return best(batch, repeats, time.process_time) / runs * 1e6


class Tracing:
    """chatagent instrumented to an SDK TracerProvider whose batch processor drops the spans (`sample=0.0`: an SDK
    provider whose sampler keeps no trace, as a sampled-out run costs; `ours=0.0`: chatagent's own sampling,
    `instrument(sample=0.0)`). The processor exports every 512 spans (its default batch), and not on a timer
    within a measurement: its thread's work then depends on the spans only."""

    def __init__(self, sample: float | None = None, ours: float = 1.0) -> None:
        self.ours = ours  # instrument(sample=): the share of runs chatagent traces at all
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        class Drop(SpanExporter):
            def export(self, spans):  # noqa: ANN001
                return SpanExportResult.SUCCESS

        sampler = ParentBased(TraceIdRatioBased(sample)) if sample is not None else None
        self.provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(Drop(), schedule_delay_millis=3_600_000))

    def __enter__(self) -> Tracing:
        from chatagent.run import telemetry

        telemetry.instrument(self.provider, sample=self.ours)
        return self

    def __exit__(self, *exc: object) -> None:
        from chatagent.run import telemetry

        telemetry.uninstrument()


class EventsOnly:
    """A global callback that takes the event tracing takes (run_start) and does nothing with it: what an observed
    run costs (its run_start event, the run's start and end around it, each call's own usage), without our
    tracing's work."""

    def __init__(self) -> None:
        from chatagent.run.events import Callbacks

        class Nothing(Callbacks):
            def on_run_start(self, e):  # noqa: ANN001
                pass

        self.callback = Nothing()

    def __enter__(self) -> EventsOnly:
        from chatagent.run.events import add_global_callback

        add_global_callback(self.callback)
        return self

    def __exit__(self, *exc: object) -> None:
        from chatagent.run.events import remove_global_callback

        remove_global_callback(self.callback)


def sdk_span_us(runs: int, repeats: int) -> float:
    """The OpenTelemetry SDK's own cost of one span like ours (the reference for b)."""
    from opentelemetry.trace import SpanKind

    tracer = Tracing().provider.get_tracer("bench")
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.provider.name": "openai",
                  "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 34}  # fmt: skip

    def span() -> None:
        tracer.start_span("chat m", None, SpanKind.CLIENT, attributes, start_time=1).end(end_time=2)

    return per_run_us(span, runs, repeats)


def sdk_spans_beside(run: Callable[[], object], calls: int) -> Callable[[], object]:
    """`run`, then the SDK calls chatagent's tracing makes for its spans (the run's, and under it each model call's
    and each tool call's), replayed with the same arguments and attributes."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    tracer = Tracing().provider.get_tracer("bench")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.provider.name": "scripted",
            "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 34}  # fmt: skip
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather", "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": "call_1"}  # fmt: skip
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent"}
    usage = {"gen_ai.usage.input_tokens": 24, "gen_ai.usage.output_tokens": 68}

    def replayed() -> None:  # the same dicts each time (the SDK copies them): building them is our tracing's cost
        run()
        t = time.time_ns()
        span = tracer.start_span("invoke_agent agent", None, SpanKind.INTERNAL, agent, start_time=t)
        parent = trace.set_span_in_context(span)
        for i in range(calls):
            if i:
                tracer.start_span("execute_tool weather", parent, SpanKind.INTERNAL, tool, start_time=t).end(end_time=t)
            tracer.start_span("chat m", parent, SpanKind.CLIENT, chat, start_time=t).end(end_time=t)
        span.set_attributes(usage)
        span.end(end_time=t)

    return replayed


def interleaved(
    variants: dict[str, tuple[Callable[[], object], Tracing | EventsOnly | None]], runs: int, repeats: int
) -> dict[str, float]:
    """Each variant's best time per run in us, its `runs` runs measured in turn with the others' (`repeats` rounds,
    so that the noise of a shared machine hits all alike); a variant with a Tracing runs with it on."""
    times: dict[str, float] = {}
    for _ in range(repeats):
        for name, (fn, tracing) in variants.items():
            if tracing is None:
                t = per_run_us(fn, runs, 1)
            else:
                with tracing:
                    t = per_run_us(fn, runs, 1)
            times[name] = min(t, times.get(name, t))
    return times


SCENARIOS = {"basic": (basic, 1), "tool": (with_tool, 2)}  # how to make the runs, and their model calls


def variant(name: str, scenario: str) -> tuple[Callable[[], object], Tracing | EventsOnly | None]:
    """A run of `scenario` as `name` measures it, and the tracing it runs under (None: none)."""
    make, calls = SCENARIOS[scenario]
    if name == "plug":
        return make(three_plugins()), None
    if name == "beside":
        return sdk_spans_beside(make(None), calls), None
    on = {"traced": Tracing, "events": EventsOnly, "sampled_out": lambda: Tracing(sample=0.0),
          "left_out": lambda: Tracing(ours=0.0)}  # fmt: skip
    return make(None), on[name]() if name in on else None


def bench_per_call(runs: int, repeats: int) -> dict[str, float]:
    """(a) and (b); each scenario's reference in us per run."""
    sdk = sdk_span_us(runs, repeats)
    show("b_sdk_span_us", f"{sdk:.1f} per span (the OpenTelemetry SDK's own cost in a loop alone, batch processor)")
    refs = {}
    for name, (_, calls) in SCENARIOS.items():
        names = ("ref", "plug", "traced", "beside", "events", "sampled_out", "left_out")
        times = interleaved({v: variant(v, name) for v in names}, runs, repeats)
        ref, plug, traced, beside, events_t, sampled_t, left_t = (times[k] for k in names)
        refs[name] = ref
        spans = 1 + calls + (calls - 1)  # the run, its model calls, its tool calls
        per_call = {k: (t - ref) / calls for k, t in times.items()}
        ours, sdk_beside = per_call["traced"] - per_call["beside"], per_call["beside"]
        show(f"a_{name}_run_reference_us", f"{ref:.1f} per run ({calls} model call{'s' if calls > 1 else ''})")
        show(
            f"a_{name}_3_plugins_us_per_model_call",
            f"{per_call['plug']:.1f} (run {plug:.1f} vs reference {ref:.1f}; goal <= 50)",
        )
        show(
            f"b_{name}_tracing_us_per_model_call",
            f"{per_call['traced']:.1f} (run {traced:.1f} vs reference {ref:.1f}; goal <= 50): ours {ours:.1f} and "
            f"the SDK's {sdk_beside:.1f} ({spans} spans replayed beside the run; ~{spans * sdk / calls:.1f} in a loop "
            "alone)",
        )
        show(
            f"b_{name}_tracing_ours_us_per_model_call",
            f"{ours:.1f} (goal <= 5; with tracing minus without minus the SDK's {sdk_beside:.1f}): an observed run "
            f"{per_call['events']:.1f} (a callback taking run_start and doing nothing), our tracing "
            f"{ours - per_call['events']:.1f}",
        )
        show(f"b_{name}_tracing_sdk_us_per_model_call", f"{sdk_beside:.1f} (the SDK's part, beside ours {ours:.1f})")
        show(
            f"b_{name}_tracing_sampled_out_us_per_model_call",
            f"{(sampled_t - ref) / calls:.1f} (an SDK provider whose sampler keeps no trace); "
            f"{(left_t - ref) / calls:.1f} left out by instrument(sample=...); beside all kept: {per_call['traced']:.1f}",
        )
    return refs


def count_runs(name: str, scenario: str, runs: int) -> None:
    """What `--count` does in a child under cachegrind: `runs` runs of the variant, after a warm-up and with what
    the warm-up left frozen out of the garbage collector's way (else a collection of the whole heap, now and then,
    lands in one count and not the other)."""
    import gc

    fn, tracing = variant(name, scenario)
    if tracing is not None:
        tracing.__enter__()
    for _ in range(30):
        fn()
    gc.collect()
    gc.freeze()
    for _ in range(runs):
        fn()


def instructions_per_run(name: str, scenario: str) -> float | None:
    """The CPU instructions one run of the variant takes (cachegrind: 210 runs less 10 runs, over 200); None
    without valgrind."""
    import re
    import shutil
    import subprocess

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    for runs in (10, 210):
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
               __file__, "--count", name, scenario, str(runs)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
        found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / 200


def bench_instructions(refs_us: dict[str, float]) -> None:
    for name, (_, calls) in SCENARIOS.items():
        ref, traced, beside = (instructions_per_run(v, name) for v in ("ref", "traced", "beside"))
        if ref is None or traced is None or beside is None:
            show(f"e_{name}_tracing_ours_instructions_per_model_call", "not measured (valgrind is not installed)")
            continue
        us = refs_us[name] / ref  # us per instruction, at the rate the reference ran at in (a)
        ours, sdk = (traced - beside) / calls, (beside - ref) / calls
        show(f"e_{name}_run_reference_instructions", f"{ref:.0f} per run ({refs_us[name]:.1f} us in a)")
        show(
            f"e_{name}_tracing_ours_instructions_per_model_call",
            f"{ours:.0f} (~{ours * us:.1f} us; goal <= 5 us), beside the SDK's {sdk:.0f} (~{sdk * us:.1f} us)",
        )


def streamed(bot: BasicAgent) -> Callable[[], object]:
    """A function that runs `bot` on USER in delta mode to the end; its last yield."""

    def run() -> object:
        last = None
        for last in bot.run(USER, delta_stream=True):  # noqa: B007
            pass
        return last

    return run


def stream_run(n: int, plugins: list | None) -> Callable[[], object]:
    return streamed(BasicAgent(llm=ScriptedLLM(default=Reply(chunks=[CHUNK] * n)), plugins=plugins))


def bench_stream(n: int, repeats: int) -> None:
    variants = {"reference": (None, False), "3_plugins": ("plugins", False), "tracing": (None, True)}
    variants["3_plugins_and_tracing"] = ("plugins", True)
    times: dict[str, list[float]] = {k: [] for k in variants}
    tracing = Tracing()
    for _ in range(repeats):  # interleaved, so that the noise of a shared machine hits all alike
        for name, (plugins, traced) in variants.items():
            fn = stream_run(n, three_plugins() if plugins else None)
            if traced:
                with tracing:
                    times[name].append(best(fn, 1, time.process_time))
            else:
                times[name].append(best(fn, 1, time.process_time))
    ref = min(times["reference"])
    show(f"c_stream_{n // 1000}k_reference_s", f"{ref:.4f} cpu ({ref / n * 1e6:.2f} us per chunk)")
    for name in list(variants)[1:]:
        t = min(times[name])
        show(
            f"c_stream_{n // 1000}k_{name}_s",
            f"{t:.4f} cpu ({(t - ref) / ref * 100:+.1f} % of the reference; goal <= 5 %)",
        )


def bench_cache(n: int, repeats: int) -> None:
    from tests.support.openai_server import OpenAIServer
    from tests.support.openai_server import Reply as ServerReply

    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.add(ServerReply(chunks=[CHUNK] * n, repeat=True))
        cfg = {"model": "m", "model_server": server.base_url, "api_key": "k", "generate_cfg": {"temperature": 0}}
        fresh = BasicAgent(llm=get_chat_model(cfg))
        cached = BasicAgent(llm=get_chat_model(cfg), generate_cfg={"cache": f"sqlite:///{tmp}/c.db"})

        streamed(cached)()  # stores it
        server_t = min(best(streamed(fresh), 1) for _ in range(repeats))
        cache_t = min(best(streamed(cached), 1) for _ in range(repeats))
        show(f"d_{n // 1000}k_from_the_loopback_server_s", f"{server_t:.3f} wall (reference)")
        show(f"d_{n // 1000}k_from_the_cache_s", f"{cache_t:.3f} wall ({cache_t / server_t:.2f}x the server stream)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs and repeats")
    parser.add_argument("--count", nargs=3, metavar=("VARIANT", "SCENARIO", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:  # a child of (e), under cachegrind
        count_runs(args.count[0], args.count[1], int(args.count[2]))
        return
    runs, repeats = (200, 3) if args.quick else (1000, 7)
    refs = bench_per_call(runs, repeats)
    bench_stream(16_000, repeats)
    bench_cache(16_000, 3 if args.quick else 5)
    bench_instructions(refs)


if __name__ == "__main__":
    main()
