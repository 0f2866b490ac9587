"""Helper for bench/serve.py: the servers it measures, each started as a process of its own.

    python bench/_serve_targets.py chatagent|unchecked|relay|stdlib|checked|checked_sentences PORT UPSTREAM_URL

- chatagent: `chatagent.server.AgentServer` over a BasicAgent on the upstream (what `chatagent serve` runs), with
  API keys (the clients send $BENCH_API_KEY) and its Host, Origin and content-type checks.
- unchecked: the same without them (no key; the app served without its Host/Origin guard): what the checks cost.
- relay: the limit: a bare Starlette app on the same uvicorn that forwards the upstream's bytes through the same
  HTTP client library (httpx.AsyncClient), with no parsing at all.
- stdlib: main's thread-per-connection server before the ASGI move (bench/_stdlib_server.py), same agent.
- checked, checked_sentences: the chatagent server with an output check (a regular expression) on the whole answer,
  or on each sentence.

Each prints "ready" once it listens, and serves until SIGTERM.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONCURRENCY = 4096


def _agent(upstream: str, plugins: list | None = None):  # noqa: ANN202
    from chatagent import BasicAgent

    llm = {"model": "m", "model_server": upstream, "api_key": "k", "generate_cfg": {"max_retries": 0}}
    return BasicAgent(llm=llm, name="bench", plugins=plugins)


def _no_address(text: str) -> str | None:
    """The output check of the checked servers: a regular expression for an e-mail address (passes on the bench's
    text, so that every stream completes whole)."""
    import re

    return "an e-mail address" if re.search(r"[\w.+-]+@[\w-]+\.\w+", text) else None


KEYS = ["bench-key-other", "bench-key"]  # two principals: the clients are the second


def chatagent(port: int, upstream: str, plugins: list | None = None) -> None:
    from chatagent.server.runner import AgentServer

    server = AgentServer(_agent(upstream, plugins), "127.0.0.1", port, max_concurrency=CONCURRENCY, grace=1,
                         api_key=KEYS, max_connections=CONCURRENCY)  # fmt: skip
    print("ready", flush=True)
    server.serve_forever()


def checked(port: int, upstream: str) -> None:
    """The chatagent server with an output check on the whole answer: the text is held until it has passed."""
    from chatagent import OutputGuardrail

    chatagent(port, upstream, [OutputGuardrail(_no_address)])


def checked_sentences(port: int, upstream: str) -> None:
    """The chatagent server with an output check per sentence: each goes out once it has passed."""
    from chatagent import OutputGuardrail

    chatagent(port, upstream, [OutputGuardrail(_no_address, per="sentence")])


def unchecked(port: int, upstream: str) -> None:
    from chatagent.server.runner import AgentServer

    server = AgentServer(_agent(upstream), "127.0.0.1", port, max_concurrency=CONCURRENCY, grace=1,
                         max_connections=CONCURRENCY)  # fmt: skip
    server.app = server.app.app  # the Starlette app inside the Host/Origin guard
    print("ready", flush=True)
    server.serve_forever()


def relay(port: int, upstream: str) -> None:
    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    limits = httpx.Limits(max_connections=CONCURRENCY)
    client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=5.0), limits=limits)

    async def completions(request: Request) -> StreamingResponse:
        body = await request.body()
        upstream_request = client.build_request(
            "POST", upstream + "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        response = await client.send(upstream_request, stream=True)

        async def relayed():  # noqa: ANN202
            try:
                async for part in response.aiter_raw():
                    yield part
            finally:
                await response.aclose()

        return StreamingResponse(relayed(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, backlog=4096,
                            lifespan="off", timeout_graceful_shutdown=1)  # fmt: skip
    print("ready", flush=True)
    uvicorn.Server(config).run()


def stdlib(port: int, upstream: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from _stdlib_server import AgentServer

    server = AgentServer(_agent(upstream), "127.0.0.1", port, max_concurrency=CONCURRENCY)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    kind, port, upstream = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    targets = {"chatagent": chatagent, "checked": checked, "checked_sentences": checked_sentences,
               "unchecked": unchecked, "relay": relay, "stdlib": stdlib}  # fmt: skip
    targets[kind](port, upstream)
