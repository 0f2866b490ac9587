"""The AWS event stream's binary framing (`application/vnd.amazon.eventstream`), as ConverseStream sends it: each
message a prelude (total length, headers length, their CRC32), headers (name, type, value), a payload and the
message's CRC32. `EventStreamSplitter` cuts a byte stream into messages as the bytes arrive and checks both CRCs.
"""

from __future__ import annotations

import struct
import zlib

from chatagent.errors import ModelErrorCode, ModelServiceError

_PRELUDE = 12  # total length, headers length, prelude CRC: 4 bytes each
_MAX_MESSAGE = 16 * 1024 * 1024  # the framing's own limit
# header value types: their fixed sizes (the variable ones, 6 bytes and 7 string, carry a 2-byte length)
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


class EventStreamSplitter:
    """Splits a byte stream into event-stream messages: `feed` gives the (headers, payload) of each message a chunk
    completes; a CRC mismatch or a bad length is a BAD_RESPONSE (retryable)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> list[tuple[dict[str, str], bytes]]:
        buf = self.buf + chunk if self.buf else chunk
        out: list[tuple[dict[str, str], bytes]] = []
        start = 0
        while len(buf) - start >= _PRELUDE:
            total, headers_length, prelude_crc = struct.unpack_from(">III", buf, start)
            if zlib.crc32(buf[start : start + 8]) != prelude_crc or not _PRELUDE + 4 <= total <= _MAX_MESSAGE:
                raise _broken("a corrupt message prelude")
            if len(buf) - start < total:
                break
            end = start + total
            (message_crc,) = struct.unpack_from(">I", buf, end - 4)
            if zlib.crc32(buf[start : end - 4]) != message_crc:
                raise _broken("a message whose CRC does not match")
            head = start + _PRELUDE
            out.append((_headers(buf[head : head + headers_length]), buf[head + headers_length : end - 4]))
            start = end
        self.buf = buf[start:]
        return out

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished message are left."""
        return bool(self.buf)


def _headers(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(data):
        n = data[i]
        name = data[i + 1 : i + 1 + n].decode("utf-8", "replace")
        kind = data[i + 1 + n]
        i += 2 + n
        if kind in (6, 7):
            (length,) = struct.unpack_from(">H", data, i)
            value = data[i + 2 : i + 2 + length]
            i += 2 + length
            if kind == 7:
                out[name] = value.decode("utf-8", "replace")
        elif kind in _FIXED:
            i += _FIXED[kind]
        else:
            raise _broken(f"a header of unknown type {kind}")
    return out


def _broken(what: str) -> ModelServiceError:
    return ModelServiceError(ModelErrorCode.BAD_RESPONSE, f"the event stream holds {what}", retryable=True)


__all__ = ["EventStreamSplitter"]
