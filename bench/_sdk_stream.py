"""One provider's official SDK used bare: a loop over its stream of one reply, nothing else. Run by
bench/native_backends.py with the interpreter of that SDK's own venv (bench/_sdk_venvs.py), offline (the guard of
qa_common.py refuses any connection that is not loopback), nothing of chatagent importable.

    python bench/_sdk_stream.py <provider> <url> wall            # prints {"us_per_chunk": ..., "chunks": ...}
    python bench/_sdk_stream.py <provider> <url> count <runs>    # a warm-up, then <runs> replies (for cachegrind)
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable

import qa_common

MODELS = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash", "bedrock": "anthropic.claude-haiku-4-5",
          "responses": "gpt-5-mini"}  # fmt: skip
KEYS = {"anthropic": "sk-ant-loopback-key", "gemini": "AIza-loopback-key", "responses": "sk-loopback-responses"}
PROMPT = "Write a long story."


def stream(provider: str, url: str) -> Callable[[], int]:
    """A function that streams one reply with the provider's SDK and returns the number of events it read."""
    model = MODELS[provider]
    if provider == "anthropic":
        import anthropic

        client = anthropic.Anthropic(api_key=KEYS[provider], base_url=url, max_retries=0)
        messages = [{"role": "user", "content": PROMPT}]

        def sdk_anthropic() -> int:
            n = 0
            with client.messages.stream(model=model, max_tokens=8192, messages=messages) as events:  # type: ignore[arg-type]
                for _ in events.text_stream:
                    n += 1
            return n

        return sdk_anthropic
    if provider == "gemini":
        from google import genai

        gclient = genai.Client(api_key=KEYS[provider], http_options=genai.types.HttpOptions(base_url=url))

        def sdk_gemini() -> int:
            return sum(1 for _ in gclient.models.generate_content_stream(model=model, contents=PROMPT))

        return sdk_gemini
    if provider == "bedrock":
        import boto3

        bclient = boto3.client("bedrock-runtime", region_name="us-west-2", endpoint_url=url)
        content = [{"role": "user", "content": [{"text": PROMPT}]}]

        def sdk_bedrock() -> int:
            return sum(1 for _ in bclient.converse_stream(modelId=model, messages=content)["stream"])  # type: ignore[arg-type]

        return sdk_bedrock
    import openai

    oclient = openai.OpenAI(api_key=KEYS[provider], base_url=url, max_retries=0)

    def sdk_openai() -> int:
        return sum(1 for _ in oclient.responses.create(model=model, input=PROMPT, stream=True))

    return sdk_openai


def main() -> None:
    qa_common.guard()
    provider, url, mode = sys.argv[1:4]
    fn = stream(provider, url)
    if mode == "count":
        for _ in range(2):
            fn()
        gc.collect()
        gc.freeze()
        for _ in range(int(sys.argv[4])):
            fn()
        return
    chunks = fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"seconds_per_reply": best, "events": chunks}))


if __name__ == "__main__":
    main()
