"""The stderr of a stdio MCP server, passed on to ours without the noise of an older server's handshake.

chatagent's MCP client first asks a server for `server/discover` (the newer protocol) and falls back to
`initialize`. A server built on mcp 1.x does not know the request and prints pydantic's account of why, some 95
lines, at every start. `ServerStderr` is the pipe such a server writes to: a thread copies each line to our
stderr as it comes, but a validation report about `server/discover` becomes one line saying what happened. Any
other report, and everything else the server prints, passes as it is.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import IO, TextIO, cast

REPORT_START = "Failed to validate request:"
# what follows that line in pydantic's report: indented lines, and the field paths ('InitializeRequest.params.x')
REPORT_LINE = re.compile(r"^(?:\s|[A-Za-z_][\w-]*(?:\.[\w-]+|\[[^\]]*\])*\s*$)")
PROBE = "server/discover"


class ServerStderr:
    """A pipe for a server's stderr (`file`, given to the process) and the thread that passes it on to `out`
    (default: sys.stderr as it is at each write)."""

    def __init__(self, name: str, out: IO[str] | None = None) -> None:
        self.name = name
        self._out = out
        read_fd, write_fd = os.pipe()
        self.file = cast(TextIO, os.fdopen(write_fd, "w", encoding="utf-8", errors="replace"))
        reader = os.fdopen(read_fd, encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._pass_on, args=(reader,), name=f"mcp-stderr-{name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close our end of the pipe (the thread ends once the server and what it started have closed theirs)."""
        with contextlib.suppress(OSError):
            self.file.close()

    def _write(self, text: str) -> None:
        out = self._out or sys.stderr
        with contextlib.suppress(OSError, ValueError):
            out.write(text)
            out.flush()

    def _pass_on(self, reader: IO[str]) -> None:
        report: list[str] = []
        with reader:
            for line in reader:
                if report:
                    if REPORT_LINE.match(line):
                        report.append(line)
                        continue
                    self._end_report(report)
                    report = []
                if line.startswith(REPORT_START):
                    report = [line]
                else:
                    self._write(line)
            if report:
                self._end_report(report)

    def _end_report(self, report: list[str]) -> None:
        if any(PROBE in line for line in report):
            self._write(
                f"chatagent: MCP server {self.name!r} runs an older MCP (mcp 1.x): it refused the newer handshake, "
                f"and the older one was used ({len(report)} lines of its report not shown)\n"
            )
        else:
            self._write("".join(report))


__all__ = ["ServerStderr"]
