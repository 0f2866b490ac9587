"""Helper for bench/serve.py: a lean OpenAI-compatible upstream on loopback, as a process of its own.

    python bench/_sse_upstream.py PORT CHUNKS INTERVAL

Every POST gets the same streamed answer: a role chunk, CHUNKS content chunks ("t0. ", "t1. ", ...: a sentence
each) one every INTERVAL seconds, a finish chunk and [DONE], as OpenAI sends them (SSE over chunked HTTP/1.1,
keep-alive). A raw asyncio protocol with every event encoded in advance, so that the upstream costs the machine as
little as possible and the servers under test are what the benchmark measures.
"""

from __future__ import annotations

import asyncio
import json
import sys


def events(chunks: int) -> tuple[bytes, list[bytes], bytes]:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def event(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = b"data: " + json.dumps({**base, "choices": [choice]}, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = head + event({"role": "assistant", "content": ""})
    body = [event({"content": f"t{i}. "}) for i in range(chunks)]
    done = b"data: [DONE]\n\n"
    last = event({}, "stop") + b"%x\r\n%s\r\n" % (len(done), done) + b"0\r\n\r\n"
    return first, body, last


class Upstream(asyncio.Protocol):
    first: bytes
    body: list[bytes]
    last: bytes
    interval: float

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            asyncio.ensure_future(self.answer())

    async def answer(self) -> None:
        write = self.transport.write  # type: ignore[attr-defined]
        write(self.first)
        for event in self.body:
            await asyncio.sleep(self.interval)
            if self.transport.is_closing():
                return
            write(event)
        write(self.last)


async def main(port: int, chunks: int, interval: float) -> None:
    Upstream.first, Upstream.body, Upstream.last = events(chunks)
    Upstream.interval = interval
    server = await asyncio.get_running_loop().create_server(Upstream, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
