"""Qwen-Agent's side of bench/stream_overhead.py; runs in the Qwen-Agent venv (see bench/_qwen_agent.py).

    python qa_stream.py scripted --sizes 1000,4000,16000 --repeats 3
    python qa_stream.py e2e --url http://127.0.0.1:PORT/v1 --chunks 16000 --repeats 3
    python qa_stream.py first_chunk --url http://127.0.0.1:PORT/v1 --samples 50
    python qa_stream.py import --repeats 3

Measured as ours is: (scripted) Qwen-Agent's BasicAgent.run() over a model that yields N chunks with no I/O
(a BaseFnCallModel subclass registered like its backends, yielding the cumulative reply per chunk as its
OpenAI backend does), CPU and wall per chunk; (e2e) BasicAgent over the loopback server, 16k chunks;
(first_chunk) time to the first content chunk through BasicAgent; (import) `import qwen_agent.agents` in a
fresh interpreter. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import qa_common

qa_common.guard()

from qwen_agent.agent import BasicAgent  # noqa: E402
from qwen_agent.llm.base import register_llm  # noqa: E402
from qwen_agent.llm.function_calling import BaseFnCallModel  # noqa: E402
from qwen_agent.llm.schema import ASSISTANT, Message  # noqa: E402

USER = [{"role": "user", "content": "Tell me a long story."}]
CHUNK = "tok "


@register_llm("bench_chunks")
class ChunkModel(BaseFnCallModel):
    """A model that streams `chunks` copies of CHUNK with no I/O, in Qwen-Agent's backend protocol."""

    def __init__(self, cfg: dict) -> None:
        super().__init__(cfg)
        self.n = int(cfg["chunks"])

    def _chat_stream(self, messages: list[Message], delta_stream: bool, generate_cfg: dict) -> Iterator[list[Message]]:
        if delta_stream:
            for _ in range(self.n):
                yield [Message(role=ASSISTANT, content=CHUNK)]
            return
        full = ""
        for _ in range(self.n):  # as TextChatAtOAI does: the whole reply so far, per chunk
            full += CHUNK
            yield [Message(role=ASSISTANT, content=full)]

    def _chat_no_stream(self, messages: list[Message], generate_cfg: dict) -> list[Message]:
        return [Message(role=ASSISTANT, content=CHUNK * self.n)]


def drain(bot: BasicAgent) -> list:
    last: list = []
    for last in bot.run(USER):  # noqa: B007
        pass
    return last


def scripted(sizes: list[int], repeats: int) -> dict:
    out = {}
    for n in sizes:
        bot = BasicAgent(llm=ChunkModel({"model": "bench", "chunks": n}))
        assert drain(bot)[-1]["content"] == CHUNK * n
        cpu = qa_common.best(lambda b=bot: drain(b), repeats, time.process_time) / n * 1e6
        wall = qa_common.best(lambda b=bot: drain(b), repeats) / n * 1e6
        out[str(n)] = {"cpu_us": cpu, "wall_us": wall}
    return {"per_chunk": out}


def e2e(url: str, n: int, repeats: int) -> dict:
    bot = BasicAgent(llm={"model": "test-model", "model_server": url, "api_key": "test"})
    assert drain(bot)[-1]["content"] == CHUNK * n
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.thread_time()
        drain(bot)
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    return {"wall_s": min(wall), "cpu_s": min(cpu)}


def first_chunk(url: str, samples: int) -> dict:
    bot = BasicAgent(llm={"model": "test-model", "model_server": url, "api_key": "test"})

    def once() -> float:
        start = time.perf_counter()
        run = bot.run(USER)
        for rsp in run:
            if rsp and rsp[0].get("content"):
                break
        elapsed = time.perf_counter() - start
        run.close()
        return elapsed

    once()  # warm up, as ours
    return {"median_s": statistics.median(once() for _ in range(samples))}


def import_time(repeats: int) -> dict:
    code = (
        "import qa_common; qa_common.guard(); import time; t = time.perf_counter(); import qwen_agent.agents; "
        "print(time.perf_counter() - t); import sys; assert not qa_common.BLOCKED, qa_common.BLOCKED"
    )
    times = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return {"import_s": min(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["scripted", "e2e", "first_chunk", "import"])
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--url")
    parser.add_argument("--chunks", type=int, default=16000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    if args.what == "scripted":
        result = scripted([int(s) for s in args.sizes.split(",")], args.repeats)
    elif args.what == "e2e":
        result = e2e(args.url, args.chunks, args.repeats)
    elif args.what == "first_chunk":
        result = first_chunk(args.url, args.samples)
    else:
        result = import_time(args.repeats)
    qa_common.emit(result)


if __name__ == "__main__":
    main()
