"""The embedded model's speed: server start, prompt reading and generation, through chatagent and raw HTTP.

    .venv/bin/python bench/local_model.py [--tokens 256] [--runs 3] [--model /path/to/model.gguf] [--threads N]

The reference is the same llama.cpp server read with plain httpx (one SSE event at a time), measured in
the same run; `chatagent_*` go through LocalModel (the OpenAI-compatible backend) and BasicAgent.
Generation runs with `ignore_eos` so every run makes exactly `--tokens` tokens. Prints `name: value`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from chatagent import BasicAgent  # noqa: E402
from chatagent.llm.base import Usage  # noqa: E402
from chatagent.llm.local import LocalModel, LocalServer, get_server  # noqa: E402

QUESTION = "Write a long story about a lighthouse keeper and a storm."
LONG_PROMPT = " ".join(
    f"Paragraph {i}: the harbour office logged ship {i * 7} arriving with {i * 13} crates of grain." for i in range(60)
)


def raw_stream(server: LocalServer, tokens: int) -> tuple[float, float, int]:
    """First-token seconds, total seconds and tokens for one streamed request read with plain httpx."""
    body = {
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"Authorization": f"Bearer {server.api_key}"}
    started = time.perf_counter()
    first = None
    n = 0
    with (
        httpx.Client(trust_env=False, timeout=300) as client,
        client.stream("POST", server.base_url + "/chat/completions", json=body, headers=headers) as r,
    ):
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                n = event["usage"]["completion_tokens"]
            choices = event.get("choices") or []
            if choices and choices[0].get("delta", {}).get("content") and first is None:
                first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started, n


def chatagent_stream(llm: LocalModel, tokens: int) -> tuple[float, float, int]:
    """The same request through LocalModel.chat (delta stream)."""
    usage = Usage()
    cfg = {"max_tokens": tokens, "ignore_eos": True, "temperature": 0.2}
    started = time.perf_counter()
    first = None
    for _ in llm.chat([{"role": "user", "content": QUESTION}], delta_stream=True, extra_generate_cfg=cfg, usage=usage):
        if first is None:
            first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started, usage.completion_tokens


def agent_stream(llm: LocalModel, tokens: int) -> tuple[float, float, int]:
    """The same request through BasicAgent.run (cumulative dicts, the default mode)."""
    bot = BasicAgent(llm=llm, generate_cfg={"max_tokens": tokens, "ignore_eos": True, "temperature": 0.2})
    started = time.perf_counter()
    first = None
    run = bot.run([{"role": "user", "content": QUESTION}])
    for _ in run:
        if first is None:
            first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started, run.usage.completion_tokens


def prompt_speed(llm: LocalModel) -> float:
    """Prompt tokens read per second (a ~1500-token prompt, no cache, one token out)."""
    usage = Usage()
    started = time.perf_counter()
    llm.chat(
        [{"role": "user", "content": LONG_PROMPT}],
        stream=False,
        extra_generate_cfg={"max_tokens": 1, "cache_prompt": False},
        usage=usage,
    )
    return usage.prompt_tokens / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model", default=None, help="a .gguf file (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the cores)")
    args = ap.parse_args()

    started = time.perf_counter()
    server = get_server(args.model, threads=args.threads)
    print(f"server_start_seconds: {server.start_seconds:.2f}")
    llm = LocalModel({"model": args.model, "threads": args.threads})
    print(f"model_ready_seconds: {time.perf_counter() - started:.2f}")
    print(f"threads: {server.threads}")
    llm.chat([{"role": "user", "content": "hi"}], stream=False, extra_generate_cfg={"max_tokens": 4})  # warm

    results: dict[str, list[tuple[float, float, int]]] = {"raw_http": [], "chatagent_llm": [], "chatagent_agent": []}
    for _ in range(args.runs):  # interleaved so that background load hits each alike
        results["raw_http"].append(raw_stream(server, args.tokens))
        results["chatagent_llm"].append(chatagent_stream(llm, args.tokens))
        results["chatagent_agent"].append(agent_stream(llm, args.tokens))
    speeds = {}
    for name, runs in results.items():
        speeds[name] = statistics.median(n / total for _, total, n in runs)
        print(f"{name}_tokens_per_second: {speeds[name]:.1f}")
        print(f"{name}_first_token_seconds: {statistics.median(first for first, _, _ in runs):.3f}")
    print(f"chatagent_llm_vs_raw_http: {speeds['chatagent_llm'] / speeds['raw_http']:.3f}")
    print(f"chatagent_agent_vs_raw_http: {speeds['chatagent_agent'] / speeds['raw_http']:.3f}")
    print(f"prompt_tokens_per_second: {prompt_speed(llm):.0f}")


if __name__ == "__main__":
    main()
