"""Server-sent events: the data of each event in a byte stream, split as the bytes arrive."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def sse_data(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The data of each server-sent event in a byte stream (see `SSESplitter`)."""
    sse = SSESplitter()
    for chunk in chunks:
        yield from sse.feed(chunk)
    yield from sse.end()


class SSESplitter:
    """Splits a byte stream into the data of its server-sent events (multi-line data joined with newlines).

    A bare JSON line (some servers send errors without `data:`) counts as an event of its own.
    """

    __slots__ = ("buf", "data")

    def __init__(self) -> None:
        self.buf = b""
        self.data: bytes | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events this chunk completes (a partial line waits for the next chunk)."""
        buf = self.buf + chunk if self.buf else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")  # a "\r" at the very end meets its "\n" with the next chunk
        lines = buf.split(b"\n")
        self.buf = lines.pop()
        out: list[bytes] = []
        data = self.data
        for line in lines:
            if not line:
                if data is not None:
                    out.append(data)
                    data = None
            elif line.startswith(b"data: "):
                data = line[6:] if data is None else data + b"\n" + line[6:]
            elif line.startswith(b"data:"):
                data = line[5:] if data is None else data + b"\n" + line[5:]
            elif line[:1] in (b"{", b"["):
                out.append(line)
            # comments (":...") and other fields (event, id, retry) are ignored
        self.data = data
        return out

    def end(self) -> list[bytes]:
        """The stream ended: an unterminated last event still counts."""
        buf, data = self.buf.rstrip(b"\r"), self.data
        self.buf, self.data = b"", None
        out: list[bytes] = []
        if buf.startswith(b"data:"):
            buf = buf[6:] if buf[5:6] == b" " else buf[5:]
            data = buf if data is None else data + b"\n" + buf
        elif buf[:1] in (b"{", b"["):
            out.append(buf)
        if data is not None:
            out.append(data)
        return out
