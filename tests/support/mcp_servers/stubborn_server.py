"""MCP test servers that misbehave about ending: `python stubborn_server.py PIDFILE mute|detach`.

mute:   never answers (not even the handshake), ignores SIGTERM and the end of its stdin.
detach: the demo server, ignoring SIGTERM, which first starts a grandchild that leaves its process group and
        session (setsid after a double fork) and ignores SIGTERM too.
Every process writes its pid as a line to PIDFILE.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def note_pid(pidfile: str) -> None:
    with open(pidfile, "a") as f:
        f.write(f"{os.getpid()}\n")


def detached_grandchild(pidfile: str) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            for fd in (0, 1):
                os.dup2(os.open(os.devnull, os.O_RDWR), fd)
            note_pid(pidfile)
            while True:
                time.sleep(60)
        os._exit(0)
    os.wait()


if __name__ == "__main__":
    pidfile, behaviour = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid(pidfile)
    if behaviour == "mute":
        while True:
            time.sleep(60)
    detached_grandchild(pidfile)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from demo_server import server

    server.run()
