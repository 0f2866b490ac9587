"""The native backends' cost per streamed chunk (Anthropic, Gemini, Bedrock, the Responses API) beside the
OpenAI-compatible backend and beside each provider's official SDK used bare (anthropic, google-genai, boto3, openai:
a loop over the SDK's stream, nothing else), and the instructions prompt caching adds to a turn's request.

    .venv/bin/python bench/native_backends.py [--sdk-instructions]

The loopback servers (tests/support/*_server.py) run in a process of their own, each answering every request with
the same cached stream of CHUNKS chunks, so that only the client's work is counted. Each variant streams in a child
process under cachegrind, RUNS_LOW and then RUNS_HIGH replies after a warm-up; the difference over the extra chunks
is its CPU instructions per chunk (load does not change it). Wall time per chunk is the best of a few repeats. Each
SDK runs in an offline venv of its own (bench/_sdk_venvs.py: made once, pinned; nothing of chatagent importable
there) with bench/_sdk_stream.py, the same loop for wall time and under cachegrind (that one only with
--sdk-instructions: an SDK's imports under cachegrind take minutes, and `make bench` stays short); a venv that cannot
be made prints the reason instead of its figures. Goal (issue 38): each native backend within 1.2x of its provider's
SDK per chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from _sdk_venvs import SDKS  # noqa: E402
from _venv import ReferenceUnavailable, offline_env  # noqa: E402

from bench._measure import show  # noqa: E402

CHUNKS = 200
AWS_ENV = {"AWS_ACCESS_KEY_ID": "AKIALOOPBACKKEY00001",
           "AWS_SECRET_ACCESS_KEY": "loopback/secret/access/key+0123456789abcd", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}  # fmt: skip
RUNS_LOW, RUNS_HIGH = 1, 3
PROVIDERS = ("anthropic", "gemini", "bedrock", "responses")
MODELS = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash", "bedrock": "anthropic.claude-haiku-4-5",
          "responses": "gpt-5-mini", "openai": "gpt-4o-mini"}  # fmt: skip


def serve() -> None:
    """The servers, each repeating a CHUNKS-chunk stream; prints their URLs, serves until stdin closes."""
    from tests.support.anthropic_server import AnthropicServer
    from tests.support.bedrock_server import BedrockServer
    from tests.support.gemini_server import GeminiServer
    from tests.support.openai_server import OpenAIServer
    from tests.support.openai_server import Reply as OpenAIReply
    from tests.support.provider_reply import Reply
    from tests.support.responses_server import ResponsesServer

    servers = {"anthropic": AnthropicServer(), "gemini": GeminiServer(), "bedrock": BedrockServer(),
               "responses": ResponsesServer(), "openai": OpenAIServer()}  # fmt: skip
    for name, server in servers.items():
        server.start()
        reply = OpenAIReply if name == "openai" else Reply
        server.add(reply(chunks=["tok "] * CHUNKS, repeat=True))
    for name, server in servers.items():
        print(name, server.base_url, flush=True)
    sys.stdin.read()
    for server in servers.values():
        server.close()


def variant(name: str, urls: dict[str, str]):
    """A function that streams one reply with the variant `name`, 'ours-<provider>' (the SDKs' are in
    bench/_sdk_stream.py)."""
    kind, provider = name.split("-", 1)
    url = urls[provider]
    msgs = [{"role": "user", "content": "Write a long story."}]
    if kind == "ours":
        from chatagent import get_chat_model

        cfg = {"model": MODELS[provider], "model_server": url, "api_key": _key(provider)}
        cfg["model_type"] = {"responses": "oai", "openai": "oai"}.get(provider, provider)
        if provider == "responses":
            cfg["api"] = "responses"
        if provider == "bedrock":
            cfg.pop("api_key")
            cfg["region"] = "us-west-2"
        llm = get_chat_model(cfg)

        def ours() -> int:
            return sum(1 for _ in llm.chat(msgs, delta_stream=True))

        return ours
    raise ValueError(f"not a variant of ours: {name!r} (the SDKs run in their own venvs: bench/_sdk_stream.py)")


def _key(provider: str) -> str:
    return {"anthropic": "sk-ant-loopback-key", "gemini": "AIza-loopback-key", "responses": "sk-loopback-responses",
            "openai": "k", "bedrock": ""}[provider]  # fmt: skip


def count(name: str, runs: int, urls: dict[str, str]) -> None:
    """A child under cachegrind: `runs` replies of the variant after a warm-up, the heap frozen."""
    import gc

    fn = variant(name, urls)
    for _ in range(2):
        fn()
    gc.collect()
    gc.freeze()
    for _ in range(runs):
        fn()


def instructions_per_chunk(name: str, urls: dict[str, str], env: dict[str, str]) -> float | None:
    """Ours (`ours-<provider>`, in this venv) or an SDK's (`sdk-<provider>`, in its venv), per chunk."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    kind, provider = name.split("-", 1)
    counts = []
    for runs in (RUNS_LOW, RUNS_HIGH):
        if kind == "ours":
            program = [sys.executable, __file__, "--count", name, str(runs)]
            run_env = env
        else:
            program = [str(SDKS[provider].ensure()), str(BENCH / "_sdk_stream.py"), provider, urls[provider], "count",
                       str(runs)]  # fmt: skip
            run_env = offline_env(_sdk_env(provider))
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *program]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600, env=run_env, cwd=BENCH)
        found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / ((RUNS_HIGH - RUNS_LOW) * CHUNKS)


def sdk_wall_per_chunk(provider: str, url: str) -> float | str:
    """Microseconds per chunk of the provider's SDK in its venv, or why there is no figure."""
    try:
        python = SDKS[provider].ensure()
        done = subprocess.run([str(python), str(BENCH / "_sdk_stream.py"), provider, url, "wall"], cwd=BENCH,
                              env=offline_env(_sdk_env(provider)), capture_output=True, text=True, timeout=600)  # fmt: skip
    except (ReferenceUnavailable, subprocess.TimeoutExpired, OSError) as exc:
        return f"not measured ({SDKS[provider].label}: {str(exc).strip().splitlines()[0]})"
    if done.returncode != 0:
        return f"not measured ({SDKS[provider].label} exited {done.returncode}: {done.stderr.strip()[-300:]})"
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds_per_reply"] / CHUNKS * 1e6


def _sdk_env(provider: str) -> dict[str, str]:
    return AWS_ENV if provider == "bedrock" else {}


def wall_per_chunk(name: str, urls: dict[str, str]) -> float:
    fn = variant(name, urls)
    fn()
    best = min(_timed(fn) for _ in range(5))
    return best / CHUNKS * 1e6


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def caching_instructions() -> None:
    """The instructions of building a three-turn Anthropic request with prompt caching on and off."""
    from chatagent import Message
    from chatagent.llm.anthropic.model import AnthropicModel
    from chatagent.llm.settings import ToolChoice

    llm = AnthropicModel({"model": "claude-sonnet-4-5", "model_server": "http://127.0.0.1:9", "api_key": "k"})
    msgs = [Message("system", "You plan trips. " * 40)]
    for i in range(3):
        msgs += [Message("user", f"Question {i}?"), Message("assistant", f"Answer {i}. " * 20)]
    msgs.append(Message("user", "And last?"))
    for label, on in (("on", True), ("off", False)):
        t = min(_timed(lambda on=on: [llm.build_call(msgs, None, {"prompt_cache": on}, ToolChoice(), True)
                                      for _ in range(200)]) for _ in range(5))  # fmt: skip
        show(f"anthropic_request_build_us_cache_{label}", f"{t / 200 * 1e6:.1f}")


def main(sdk_instructions: bool) -> None:
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        urls = {}
        assert server.stdout is not None
        while len(urls) < 5:
            line = server.stdout.readline()
            if not line:
                raise RuntimeError("the loopback servers did not start")
            name, url = line.split()
            urls[name] = url
        env = {**os.environ, "BENCH_URLS": " ".join(f"{k}={v}" for k, v in urls.items())}
        env.update(AWS_ENV)
        os.environ.update(AWS_ENV)
        ours_openai = instructions_per_chunk("ours-openai", urls, env)
        show("openai_compatible_instructions_per_chunk", f"{ours_openai:.0f}" if ours_openai else "not measured")
        show("openai_compatible_wall_us_per_chunk", f"{wall_per_chunk('ours-openai', urls):.2f}")
        for provider in PROVIDERS:
            ours = instructions_per_chunk(f"ours-{provider}", urls, env)
            try:
                sdk = instructions_per_chunk(f"sdk-{provider}", urls, env) if sdk_instructions else None
            except (ReferenceUnavailable, subprocess.SubprocessError) as exc:
                sdk = None
                show(f"{provider}_sdk_instructions", f"not measured ({str(exc).strip().splitlines()[0]})")
            if ours is not None and sdk is None:
                show(f"{provider}_ours_instructions_per_chunk", f"{ours:.0f}")
                show(f"{provider}_sdk_instructions_per_chunk", "not measured (run with --sdk-instructions)")
            elif ours is None or sdk is None:
                show(f"{provider}_instructions_per_chunk", "not measured (valgrind is not installed)")
            else:
                show(f"{provider}_ours_instructions_per_chunk", f"{ours:.0f}")
                show(f"{provider}_sdk_instructions_per_chunk", f"{sdk:.0f}")
                show(f"{provider}_ours_over_sdk", f"{ours / sdk:.2f} (goal <= 1.2)")
            ours_wall = wall_per_chunk(f"ours-{provider}", urls)
            sdk_wall = sdk_wall_per_chunk(provider, urls[provider])
            show(f"{provider}_ours_wall_us_per_chunk", f"{ours_wall:.2f}")
            show(f"{provider}_sdk_wall_us_per_chunk", f"{sdk_wall:.2f}" if isinstance(sdk_wall, float) else sdk_wall)
            if isinstance(sdk_wall, float):
                show(f"{provider}_ours_over_sdk_wall", f"{ours_wall / sdk_wall:.2f} (goal <= 1.2)")
        caching_instructions()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The native backends' cost per streamed chunk beside the SDKs'.")
    parser.add_argument("--sdk-instructions", action="store_true", help="count the SDKs' instructions too (slow)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the loopback servers' process
    parser.add_argument("--count", nargs=2, metavar=("VARIANT", "RUNS"), help=argparse.SUPPRESS)  # under cachegrind
    args = parser.parse_args()
    if args.serve:
        serve()
    elif args.count:
        given = dict(pair.split("=", 1) for pair in os.environ["BENCH_URLS"].split())
        count(args.count[0], int(args.count[1]), given)
    else:
        main(args.sdk_instructions)
