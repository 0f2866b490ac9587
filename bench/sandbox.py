"""The code interpreter's sandbox: what a session's first call, a later call and its end cost.

    .venv/bin/python bench/sandbox.py [--calls 30] [--sessions 5]

References, measured in the same run: a bare `python -c pass` subprocess (start and exit: what any fresh
interpreter costs), and one request/reply over the pipes of a Python child that is already running (what a
later call cannot go below). For each sandbox mode that works here (bubblewrap; process mode as root with an
interpreter every user can run), `first_call` is a new session's first call (lease a uid, start the isolated
kernel, run `1`), `call` a later call, `call_with_figure` one that draws a matplotlib figure (where the interpreter has matplotlib), and `close` the
end of a session (every process killed, files removed, uid returned). Prints `name: value` lines (ms, medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatagent.tools.code_interpreter import CodeInterpreter  # noqa: E402
from chatagent.tools.sandbox import SandboxError  # noqa: E402

ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"
FIGURE = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms"


def references(calls: int) -> None:
    starts = []
    for _ in range(max(5, calls // 3)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        starts.append(time.perf_counter() - t0)
    print(f"reference_python_subprocess_start: {_ms(starts)}")
    child = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    trips = []
    for i in range(calls):
        t0 = time.perf_counter()
        child.stdin.write(b'{"code": "1", "cell": %d}\n' % i)
        child.stdin.flush()
        child.stdout.readline()
        trips.append(time.perf_counter() - t0)
    child.stdin.close()
    child.wait()
    print(f"reference_pipe_round_trip: {_ms(trips)}")


def sandbox_mode(mode: str, calls: int, sessions: int) -> None:
    cfg: dict = {"timeout": 30, "sandbox": mode}
    if mode == "process":
        cfg["python"] = "/usr/bin/python3"
    tool = CodeInterpreter(cfg)
    first, later, closes, figures = [], [], [], []
    try:
        for s in range(sessions):
            t0 = time.perf_counter()
            out = tool.call({"code": "1"}, session_id=f"bench-{s}")
            first.append(time.perf_counter() - t0)
            if not str(out).endswith("result:\n1"):
                raise SandboxError(str(out)[:300])
            for _ in range(calls):
                t0 = time.perf_counter()
                tool.call({"code": "1"}, session_id=f"bench-{s}")
                later.append(time.perf_counter() - t0)
            if s == 0 and "result" in str(tool.call({"code": "import matplotlib.pyplot\n1"}, session_id="bench-0")):
                for _ in range(max(3, calls // 5)):
                    t0 = time.perf_counter()
                    out = tool.call({"code": FIGURE}, session_id="bench-0")
                    figures.append(time.perf_counter() - t0)
                    assert isinstance(out, list) and out[-1].image, out
            t0 = time.perf_counter()
            tool.close_session(f"bench-{s}")
            closes.append(time.perf_counter() - t0)
    except SandboxError as e:
        print(f"{mode}_unavailable: {str(e)[:120]}")
        return
    finally:
        tool.close()
    print(f"{mode}_first_call: {_ms(first)}")
    print(f"{mode}_call: {_ms(later)}")
    if figures:
        print(f"{mode}_call_with_figure: {_ms(figures)}")
    print(f"{mode}_close: {_ms(closes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="later calls per session")
    parser.add_argument("--sessions", type=int, default=5, help="sessions started and closed per mode")
    args = parser.parse_args()
    references(args.calls)
    sandbox_mode("bwrap", args.calls, args.sessions)
    if os.geteuid() == 0 and os.access("/usr/bin/python3", os.X_OK):
        sandbox_mode("process", args.calls, args.sessions)
    else:
        print("process_unavailable: needs root and /usr/bin/python3")


if __name__ == "__main__":
    main()
