"""The native backends' cost per streamed chunk (Anthropic, Gemini, Bedrock, the Responses API) beside the
OpenAI-compatible backend and beside each provider's official SDK used bare (anthropic, google-genai, boto3, openai:
a loop over the SDK's stream, nothing else), and the instructions prompt caching adds to a turn's request.

    .venv/bin/python bench/native_backends.py [--sdk-instructions]

The loopback servers (tests/support/*_server.py) run in a process of their own, each answering every request with
the same cached stream of CHUNKS chunks, so that only the client's work is counted. Each variant streams in a child
process under cachegrind, RUNS_LOW and then RUNS_HIGH replies after a warm-up; the difference over the extra chunks
is its CPU instructions per chunk (load does not change it). Wall time per chunk is the best of a few repeats in
this process. The SDKs come from the dev extra, in this venv (they are clients only: nothing of chatagent is on
their path). Goal (issue 38): each native backend within 1.2x of its provider's SDK per chunk.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._measure import show  # noqa: E402

CHUNKS = 200
RUNS_LOW, RUNS_HIGH = 1, 3
# the SDKs under cachegrind take many minutes (their imports alone): asked for with --sdk-instructions
SDK_INSTRUCTIONS = "--sdk-instructions" in sys.argv
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
    """A function that streams one reply with the variant `name` ('ours-<provider>' or 'sdk-<provider>')."""
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
    if provider == "anthropic":
        import anthropic

        client = anthropic.Anthropic(api_key=_key(provider), base_url=url, max_retries=0)

        def sdk_anthropic() -> int:
            n = 0
            with client.messages.stream(model=MODELS[provider], max_tokens=8192, messages=msgs) as stream:  # type: ignore[arg-type]
                for _ in stream.text_stream:
                    n += 1
            return n

        return sdk_anthropic
    if provider == "gemini":
        from google import genai

        gclient = genai.Client(api_key=_key(provider), http_options=genai.types.HttpOptions(base_url=url))

        def sdk_gemini() -> int:
            return sum(1 for _ in gclient.models.generate_content_stream(model=MODELS[provider], contents="Write."))

        return sdk_gemini
    if provider == "bedrock":
        import boto3

        bclient = boto3.client("bedrock-runtime", region_name="us-west-2", endpoint_url=url)
        content = [{"role": "user", "content": [{"text": "Write a long story."}]}]

        def sdk_bedrock() -> int:
            return sum(1 for _ in bclient.converse_stream(modelId=MODELS[provider], messages=content)["stream"])

        return sdk_bedrock
    import openai

    oclient = openai.OpenAI(api_key=_key(provider), base_url=url, max_retries=0)

    def sdk_openai() -> int:
        return sum(1 for _ in oclient.responses.create(model=MODELS["responses"], input="Write.", stream=True))

    return sdk_openai


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
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counts = []
    for runs in (RUNS_LOW, RUNS_HIGH):
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
               __file__, "--count", name, str(runs)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800, env=env)
        found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from cachegrind: {out.stderr[-500:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / ((RUNS_HIGH - RUNS_LOW) * CHUNKS)


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


def main() -> None:
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
        env.update({"AWS_ACCESS_KEY_ID": "AKIALOOPBACKKEY00001",
                    "AWS_SECRET_ACCESS_KEY": "loopback/secret/access/key+0123456789abcd",
                    "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent",
                    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"})  # fmt: skip
        os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
        ours_openai = instructions_per_chunk("ours-openai", urls, env)
        show("openai_compatible_instructions_per_chunk", f"{ours_openai:.0f}" if ours_openai else "not measured")
        show("openai_compatible_wall_us_per_chunk", f"{wall_per_chunk('ours-openai', urls):.2f}")
        for provider in PROVIDERS:
            ours = instructions_per_chunk(f"ours-{provider}", urls, env)
            sdk = instructions_per_chunk(f"sdk-{provider}", urls, env) if SDK_INSTRUCTIONS else None
            if ours is not None and sdk is None:
                show(f"{provider}_ours_instructions_per_chunk", f"{ours:.0f}")
                show(f"{provider}_sdk_instructions_per_chunk", "not measured (run with --sdk-instructions)")
            elif ours is None or sdk is None:
                show(f"{provider}_instructions_per_chunk", "not measured (valgrind is not installed)")
            else:
                show(f"{provider}_ours_instructions_per_chunk", f"{ours:.0f}")
                show(f"{provider}_sdk_instructions_per_chunk", f"{sdk:.0f}")
                show(f"{provider}_ours_over_sdk", f"{ours / sdk:.2f} (goal <= 1.2)")
            show(f"{provider}_ours_wall_us_per_chunk", f"{wall_per_chunk(f'ours-{provider}', urls):.2f}")
            show(f"{provider}_sdk_wall_us_per_chunk", f"{wall_per_chunk(f'sdk-{provider}', urls):.2f}")
        caching_instructions()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--count"]:
        given = dict(pair.split("=", 1) for pair in os.environ["BENCH_URLS"].split())
        count(sys.argv[2], int(sys.argv[3]), given)
    else:
        main()
