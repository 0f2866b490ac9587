"""The kernel that runs inside the code interpreter's sandbox (standard library only; never imported by chatagent).

Started as ``python -I -c <this source> <config JSON>`` by `chatagent.tools.sandbox.Sandbox`. It first makes
itself safe (network namespace when asked and possible, drop to the sandbox uid, no new privileges, resource
limits, stdin/stdout of the user code pointed at /dev/null), then answers one JSON request per line on the saved
protocol pipes. Variables persist between requests. Everything here runs before any model code is read.

    {"op": "run", "id", "code", "cell", "timeout", "max_output"}
        -> {"id", "cell", "stdout", "stderr", "result", "error", "error_kind", "figures": [n1, n2...], "dropped"}
           then the figures' PNG bytes, n1 + n2 + ... of them, right after the line
    {"op": "put", "id", "name", "size"} -> {"id", "ok": true} or {"id", "ok": false, "exists"|"error"};
        after "ok", exactly `size` raw bytes follow -> {"id", "written", "error"}

Model code runs in this process and can rewrite any of it: the host trusts nothing it receives from here.
"""

from __future__ import annotations

import ast
import ctypes
import io
import json
import linecache
import os
import resource
import signal
import sys
import time
import traceback

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing into the sandbox's startup
if TYPE_CHECKING:
    from typing import Any, TypeGuard

CONFIG = json.loads(sys.argv[1])
KERNEL_PID = os.getpid()
MAX_ERROR_CHARS = 2000
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
work_fd = -1  # the work directory, opened once: files the host sends are created relative to it


class CellTimeout(BaseException):
    """The cell ran past its wall-clock limit (raised by the SIGALRM handler)."""


class OutputLimit(BaseException):
    """The cell printed more than the output limit."""


def _unshare_network(libc: ctypes.CDLL) -> str:
    """Move into a fresh network namespace (only loopback, down): as root, else through a user namespace."""
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) == 0:
        return "network namespace"
    if libc.unshare(clone_newuser | clone_newnet) == 0:
        return "user and network namespace"
    return ""


def _setup() -> tuple[int, int, dict[str, Any]]:
    global work_fd
    status: dict[str, Any] = {"pid": KERNEL_PID}
    libc = ctypes.CDLL(None, use_errno=True)
    inp, out = os.dup(0), os.dup(1)  # os.dup makes non-inheritable copies: exec'd programs never see them
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    if CONFIG.get("unshare_net"):
        status["network"] = _unshare_network(libc)
    work_dir = CONFIG["work_dir"]
    uid = CONFIG.get("uid")
    needed = [os.path.realpath(sys.executable), os.path.dirname(os.__file__), work_dir]
    if uid is not None:
        if CONFIG.get("own_work_dir"):  # a fresh tmpfs made by bubblewrap, owned by root until now
            os.chown(work_dir, uid, uid)
            os.chmod(work_dir, 0o700)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("the sandbox could not drop root")
        for path in needed:
            if not os.access(path, os.R_OK | os.X_OK):
                raise SystemExit(f"the sandbox's uid cannot reach {path} (a directory on its way is private)")
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid programs give no privileges from here on
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # set after setuid, which clears it
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the code come back to us to be reaped
    status["uid"] = os.getuid()

    def limit(which: int, value: int | None) -> None:
        if value is not None:
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))

    mb = 1024 * 1024
    limit(resource.RLIMIT_AS, CONFIG["memory_mb"] * mb if CONFIG.get("memory_mb") else None)
    cpu = CONFIG.get("cpu_seconds")
    if cpu is not None:  # SIGXCPU at the soft limit ends the process; SIGKILL 2 s later if it survives
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    limit(resource.RLIMIT_NPROC, CONFIG.get("nproc"))
    limit(resource.RLIMIT_FSIZE, CONFIG["max_file_mb"] * mb if CONFIG.get("max_file_mb") else None)
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NOFILE, 256)
    os.chdir(work_dir)
    work_fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    sys.path.insert(0, work_dir)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing past the file size limit raises OSError instead
    os.dup2(null, 2)
    os.close(null)
    return inp, out, status


def _on_alarm(signum: int, frame: object) -> None:
    raise CellTimeout()


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.dropped = 0


class _CappedWriter(io.TextIOBase):
    """A text stream that keeps what is written up to a shared budget, then stops the code."""

    def __init__(self, budget: _Budget) -> None:
        self.parts: list[str] = []
        self.budget = budget

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: object) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        b = self.budget
        if len(s) > b.left:
            self.parts.append(s[: b.left])
            b.dropped += len(s) - b.left
            b.left = 0
            raise OutputLimit()
        self.parts.append(s)
        b.left -= len(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.parts)


def _reap() -> bool:
    """Collect finished child processes (zombies would count against the process limit); whether any child is
    left. The kernel is a subreaper, so no child left means no descendant left at all.

    (A subprocess.Popen finished between cells then reports returncode 0 from wait(): the price of that.)
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_others() -> None:
    """Kill every process the code started, detached or not (each is our descendant: we are a subreaper).

    kill(-1) reaches exactly the session's processes, because the session has its own uid (as root) or its own
    pid namespace (bubblewrap), and never this process itself. A fork bomb is still forking while we kill:
    we go on until no child is left.
    """
    if os.getuid() == 0 or not (CONFIG.get("pid_namespace") or CONFIG.get("uid") is not None):
        return  # never kill(-1) as root or outside a namespace of our own (the host starts neither)
    deadline = time.monotonic() + 5.0
    while _reap() and time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.001)


def _short(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _format_exception(e: BaseException) -> str:
    tb = e.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    lines = traceback.format_exception(type(e), e, tb)
    text = "".join(lines).strip()
    if isinstance(e, ModuleNotFoundError):
        text += (
            "\n(Only the packages installed in this interpreter's environment are available; the sandbox has no "
            "network to install more.)"
        )
    return _short(text)


def _figures() -> tuple[list[bytes], str]:
    """The open matplotlib figures as PNG bytes (within the size caps), and a note on any left out."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], ""
    figures: list[bytes] = []
    left_out = 0
    budget = CONFIG["max_figures_total"]
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", dpi=100, bbox_inches="tight")
            data = buf.getvalue()
            if len(figures) >= CONFIG["max_figures"] or len(data) > min(CONFIG["max_figure_bytes"], budget):
                left_out += 1
                continue
            budget -= len(data)
            figures.append(data)
    finally:
        plt.close("all")
    note = f"({left_out} figure(s) left out: too many or too large)" if left_out else ""
    return figures, note


def run_cell(code: str, cell: int, timeout: float, namespace: dict[str, Any], max_output: int) -> dict[str, Any]:
    """Execute one cell in `namespace`; the reply dict (never raises, never returns in a forked child)."""
    budget = _Budget(max_output)
    out, err = _CappedWriter(budget), _CappedWriter(budget)
    reply: dict[str, Any] = {"cell": cell, "result": None, "error": None, "error_kind": None, "figures": []}
    filename = f"<cell-{cell}>"
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    notes: list[str] = []
    try:
        try:
            tree = ast.parse(code, filename)
        except (SyntaxError, ValueError) as e:
            reply["error"] = _short("".join(traceback.format_exception_only(type(e), e)).strip())
            reply["error_kind"] = "syntax"
            return reply
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):
            tree.body.pop()
        else:
            last = None
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
                if value is not None:
                    namespace["_"] = value
                    text = repr(value)
                    reply["result"] = text if len(text) <= max_output else text[:max_output] + "...(truncated)"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if os.getpid() != KERNEL_PID:
                os._exit(0)
    except CellTimeout:
        _kill_others()
        reply["error"] = f"Timeout: the code was stopped after {timeout:g} seconds (the time limit)."
        reply["error_kind"] = "timeout"
    except OutputLimit:
        reply["error"] = (
            f"Output limit: the code printed more than {max_output} characters and was stopped. "
            "Print less (a summary, the first rows, a count)."
        )
        reply["error_kind"] = "output"
    except MemoryError:
        limit = CONFIG.get("memory_mb")
        reply["error"] = f"MemoryError: the code needed more memory than the sandbox allows ({limit} MB)."
        reply["error_kind"] = "memory"
    except KeyboardInterrupt:
        _kill_others()
        reply["error"] = "KeyboardInterrupt: the code was interrupted."
        reply["error_kind"] = "timeout"
    except SystemExit as e:
        reply["error"] = f"SystemExit({e.code!r}): the code called exit(); the session's variables are kept."
        reply["error_kind"] = "exception"
    except BaseException as e:
        reply["error"] = _format_exception(e)
        reply["error_kind"] = "exception"
    finally:
        if os.getpid() != KERNEL_PID:
            os._exit(1)
        sys.stdout, sys.stderr = saved
        if not CONFIG.get("keep_processes"):
            _kill_others()  # nothing the call started keeps running after it
        _reap()
        try:
            reply["figures"], note = _figures()
            notes.append(note)
        except Exception as e:  # a figure that cannot be drawn must not lose the rest of the reply
            notes.append(f"(figures could not be saved: {type(e).__name__}: {e})")
        reply["stdout"], reply["stderr"] = out.text(), err.text() + "".join(notes)
        reply["dropped"] = budget.dropped
    return reply


def put_file(req: dict[str, Any], requests: io.BufferedReader, out: int) -> dict[str, Any]:
    """Create a file the host sends (never replacing one: the code may have changed or replaced it)."""
    name, size, rid = str(req.get("name", "")), int(req.get("size", 0)), req.get("id")
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return {"ok": False, "error": f"bad file name {name!r}"}
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=work_fd)
    except FileExistsError:
        return {"ok": False, "exists": True}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e.strerror}"}
    _send(out, {"id": rid, "ok": True})
    written, error = 0, None
    with os.fdopen(fd, "wb") as f:
        while size > 0:
            chunk = requests.read(min(size, 1 << 20))
            if not chunk:
                break
            size -= len(chunk)
            if error is None:
                try:
                    f.write(chunk)
                    written += len(chunk)
                except OSError as e:  # the disk quota or the file size limit: keep reading to stay in step
                    error = f"{type(e).__name__}: {e.strerror}"
    return {"written": written, "error": error}


def _send(fd: int, obj: dict[str, Any]) -> None:
    figures = obj.pop("figures", None)
    if figures is not None:
        obj["figures"] = [len(f) for f in figures]
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "replace") + b"".join(figures or ())
    while data:
        data = data[os.write(fd, data) :]


def _is_object(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether a value json.loads made is a JSON object."""
    return isinstance(value, dict)


def main() -> None:
    inp, out, status = _setup()
    status["ready"] = True
    _send(out, status)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    requests = os.fdopen(inp, "rb")
    for line in requests:
        req: Any = None  # what json.loads made of the line: not always a dict
        reply: dict[str, Any]
        try:
            req = json.loads(line)
            if req.get("op") == "put":
                reply = put_file(req, requests, out)
            else:
                code, cell, timeout, max_output = req["code"], req["cell"], req["timeout"], req["max_output"]
                reply = run_cell(code, int(cell), float(timeout), namespace, int(max_output))
        except MemoryError:
            reply = {"error": "MemoryError while preparing the reply.", "error_kind": "memory"}
        except (ValueError, KeyError, TypeError, AttributeError):
            reply = {"error": "bad request", "error_kind": "protocol"}
        reply["id"] = req.get("id") if _is_object(req) else None
        _send(out, reply)


main()
