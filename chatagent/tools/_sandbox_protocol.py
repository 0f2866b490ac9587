"""The host's side of the kernel's pipe protocol, written for a kernel that model code may have rewritten.

Everything that comes back is bounded and checked before the host keeps it: a reply line has a size cap (a
longer one is a protocol error and the session restarts), texts are cut to the output limit, the error kind
is one of the known ones. Figures follow their reply line as raw PNG bytes whose sizes the line declares
(checked against the caps before a byte is read), and a figure is kept only if it is a well-formed PNG. A
figure is bytes from the pipe, never a path: the host opens nothing the sandbox names.
"""

from __future__ import annotations

import base64
import json
import os
import select
import time
import zlib
from dataclasses import dataclass
from typing import Any, TypedDict, TypeGuard

from chatagent.errors import ChatAgentError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 4 * 1024 * 1024  # one PNG
MAX_FIGURES = 10  # per call
MAX_FIGURES_TOTAL = 12 * 1024 * 1024  # all of a call's PNGs
MAX_ERROR_CHARS = 4000
ERROR_KINDS = (None, "syntax", "exception", "timeout", "memory", "output", "crashed", "protocol")


class ProtocolError(ChatAgentError):
    """The kernel broke the protocol (a reply too large, not JSON, or the pipe ended)."""


@dataclass(frozen=True)
class Figure:
    """A PNG the code drew, checked: its bytes as base64, and its size in pixels."""

    base64: str
    width: int
    height: int

    @property
    def data_url(self) -> str:
        return "data:image/png;base64," + self.base64


class _Output(TypedDict):
    stdout: str
    stderr: str
    result: str | None
    error: str | None
    error_kind: str | None  # one of ERROR_KINDS
    figures: list[Figure]
    dropped: int


class RunReply(_Output, total=False):
    """What a cell gave back (`Sandbox.run`): checked, bounded, with `restarted=True` when the kernel died."""

    restarted: bool


def is_json_object(value: object) -> TypeGuard[dict[str, object]]:
    """Whether a value json.loads made is a JSON object (its values are anything JSON holds)."""
    return isinstance(value, dict)


def is_json_list(value: object) -> TypeGuard[list[object]]:
    """Whether a value json.loads made is a JSON array."""
    return isinstance(value, list)


def reply_cap(max_output_chars: int) -> int:
    """The longest reply line an honest kernel can send: its texts, JSON-escaped, and some room."""
    return 1024 * 1024 + 24 * max_output_chars


class Channel:
    """Reads newline-delimited JSON replies from the kernel's stdout and writes requests to its stdin."""

    def __init__(self, read_fd: int, write_fd: int, cap: int) -> None:
        self.read_fd, self.write_fd, self.cap = read_fd, write_fd, cap
        self._buf = bytearray()
        os.set_blocking(write_fd, False)

    def send(self, data: bytes, deadline: float) -> None:
        """Write all of `data`, or raise ProtocolError at the deadline (a kernel that stopped reading)."""
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError("the sandbox stopped reading its requests")
            _, ready, _ = select.select([], [self.write_fd], [], left)
            if ready:
                try:
                    view = view[os.write(self.write_fd, view) :]
                except BlockingIOError:
                    continue

    def request(self, obj: dict[str, Any], deadline: float) -> None:
        self.send((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"), deadline)

    def reply(self, request_id: int | None, deadline: float) -> dict[str, object]:
        """The next reply object answering `request_id` (lines answering an earlier request are skipped).

        Raises TimeoutError at the deadline, ProtocolError for anything an honest kernel never sends.
        """
        while True:
            line = self._line(deadline)
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                raise ProtocolError("a reply that is not JSON") from None
            if not is_json_object(obj):
                raise ProtocolError("a reply that is not a JSON object")
            if "figures" in obj:  # read them even for a reply we skip: they are part of it
                obj["figures"] = self._figures(obj["figures"], deadline)
            if request_id is None or obj.get("id") == request_id:
                return obj

    def _figures(self, sizes: object, deadline: float) -> list[bytes]:
        counts = _figure_sizes(sizes)
        if counts is None:
            raise ProtocolError("figures larger or more than the limits allow")
        return [self._exactly(n, deadline) for n in counts]

    def _exactly(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply in time")
        ready, _, _ = select.select([self.read_fd], [], [], left)
        if ready:
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise ProtocolError("the sandbox process ended")
            self._buf += chunk

    def _line(self, deadline: float) -> bytes:
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if 0 <= end <= self.cap:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            if end > self.cap or len(self._buf) > self.cap:
                self._buf = bytearray()
                raise ProtocolError(f"a reply larger than {self.cap >> 20} MB")
            start = len(self._buf)
            self._fill(deadline)


def _figure_sizes(sizes: object) -> list[int] | None:
    """The PNG sizes a reply line declares, if they are within the caps (else None)."""
    if not is_json_list(sizes) or len(sizes) > MAX_FIGURES:
        return None
    counts = [n for n in sizes if type(n) is int and 0 <= n <= MAX_FIGURE_BYTES]
    return counts if len(counts) == len(sizes) and sum(counts) <= MAX_FIGURES_TOTAL else None


def clean_reply(raw: dict[str, object], max_output: int) -> RunReply:
    """A run reply reduced to what an honest kernel sends, with the figures checked."""
    error = _text(raw.get("error"), MAX_ERROR_CHARS) or None
    kind = raw.get("error_kind")
    if kind not in ERROR_KINDS or (kind is None and error):
        kind = "exception" if error else None
    stdout = _text(raw.get("stdout"), max_output)
    stderr = _text(raw.get("stderr"), max(0, max_output - len(stdout)) + 200)
    result = raw.get("result")
    result = _text(result, max_output + 20) if isinstance(result, str) else None
    dropped = raw.get("dropped")
    dropped = dropped if isinstance(dropped, int) and 0 <= dropped < 1 << 62 else 0
    figures: list[Figure] = []
    rejected = 0
    items = raw.get("figures")
    for item in items if is_json_list(items) else []:
        figure = check_png(item)
        if figure is None:
            rejected += 1
        else:
            figures.append(figure)
    if rejected:
        stderr += f"\n({rejected} figure(s) dropped: not a valid PNG within the size limits)"
    return {"stdout": stdout, "stderr": stderr, "result": result, "error": error, "error_kind": kind,
            "figures": figures, "dropped": dropped}  # fmt: skip


def _text(value: object, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def check_png(data: object) -> Figure | None:
    """`data` as a Figure if it is a PNG (the signature, then a valid IHDR chunk) within the size cap."""
    if not isinstance(data, bytes) or not 33 <= len(data) <= MAX_FIGURE_BYTES or not data.startswith(PNG_MAGIC):
        return None
    if data[12:16] != b"IHDR" or int.from_bytes(data[8:12], "big") != 13:
        return None
    if zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big"):
        return None
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if not (0 < width <= 32768 and 0 < height <= 32768):
        return None
    return Figure(base64.b64encode(data).decode("ascii"), width, height)
