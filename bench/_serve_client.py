"""Helper for bench/serve.py: N concurrent streaming clients, as a process of its own (aiohttp).

    python bench/_serve_client.py URL MODEL CLIENTS CHUNKS

Starts CLIENTS streaming chat completions at once against URL (a base URL ending in /v1), reads every SSE event,
and checks each answer is the upstream's whole text ("t0. t1. ... t{CHUNKS-1}. "). Prints one JSON line: completed,
failed (with the first errors), p50/p99 time to first content chunk, content chunks received, wall time.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time

import aiohttp
import orjson

# $BENCH_API_KEY: sent as the bearer key (a server that requires one)
HEADERS = {"Content-Type": "application/json"} | (
    {"Authorization": f"Bearer {os.environ['BENCH_API_KEY']}"} if os.environ.get("BENCH_API_KEY") else {}
)


async def one(session: aiohttp.ClientSession, url: str, body: bytes, expected: str) -> tuple[float | None, int, str]:
    """(seconds to the first content chunk, content chunks, error or '')."""
    start = time.perf_counter()
    first = None
    chunks = 0
    text: list[str] = []
    buffer = b""
    try:
        async with session.post(url, data=body, headers=HEADERS) as r:
            if r.status != 200:
                return None, 0, f"HTTP {r.status}"
            async for part in r.content.iter_any():
                buffer += part
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    data = event[6:]
                    if data == b"[DONE]" or not data:
                        continue
                    choices = orjson.loads(data).get("choices") or [{}]
                    piece = choices[0].get("delta", {}).get("content")
                    if piece:
                        if first is None:
                            first = time.perf_counter() - start
                        chunks += 1
                        text.append(piece)
    except Exception as e:
        return first, chunks, f"{type(e).__name__}: {e}"[:200]
    got = "".join(text)
    return first, chunks, "" if got == expected else f"incomplete text ({len(got)} of {len(expected)} chars)"


async def main(base: str, model: str, clients: int, chunks: int) -> dict:
    expected = "".join(f"t{i}. " for i in range(chunks))
    body = json.dumps({"model": model, "stream": True, "messages": [{"role": "user", "content": "go"}]}).encode()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        results = await asyncio.gather(
            *(one(session, base + "/chat/completions", body, expected) for _ in range(clients))
        )
        wall = time.perf_counter() - start
    firsts = sorted(r[0] for r in results if r[0] is not None)
    errors = [r[2] for r in results if r[2]]

    def pct(p: float) -> float | None:
        return firsts[min(len(firsts) - 1, int(p * len(firsts)))] if firsts else None

    return {
        "completed": clients - len(errors),
        "failed": len(errors),
        "errors": sorted(set(errors))[:3],
        "ttfc_p50": pct(0.50),
        "ttfc_p99": pct(0.99),
        "chunks": sum(r[1] for r in results),
        "wall": wall,
    }


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    out = asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    print(json.dumps(out), flush=True)
