"""The kernel that runs inside the code interpreter's sandbox (standard library only; never imported by chatagent).

Started as ``python -I -c <this source> <config JSON>`` by `chatagent.tools.sandbox.Sandbox`. It first makes
itself safe (network namespace when asked and possible, drop to the sandbox uid, resource limits, stdin/stdout
of the user code pointed at /dev/null), then answers one JSON request per line on the saved protocol pipes:
``{"code": ..., "cell": n, "timeout": s}`` -> ``{"stdout", "stderr", "result", "error", "error_kind", "figures"}``.
Variables persist between requests. Everything here runs before any model code is read.
"""

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

CONFIG = json.loads(sys.argv[1])
KERNEL_PID = os.getpid()
MAX_ERROR_CHARS = 2000


class CellTimeout(BaseException):
    """The cell ran past its wall-clock limit (raised by the SIGALRM handler)."""


class OutputLimit(BaseException):
    """The cell printed more than the output limit."""


def _unshare_network() -> str:
    """Move into a fresh network namespace (only loopback, down): as root, else through a user namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) == 0:
        return "network namespace"
    if libc.unshare(clone_newuser | clone_newnet) == 0:
        return "user and network namespace"
    return ""


def _setup() -> tuple[int, int, dict]:
    status: dict = {"pid": KERNEL_PID}
    inp, out = os.dup(0), os.dup(1)  # os.dup makes non-inheritable copies: child processes never see them
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    if CONFIG.get("unshare_net"):
        status["network"] = _unshare_network()
    uid = CONFIG.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setgid(CONFIG["gid"])
        os.setuid(uid)
    status["uid"] = os.getuid()

    def limit(which: int, value: int | None) -> None:
        if value is not None:
            soft, hard = resource.getrlimit(which)
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
    os.chdir(CONFIG["work_dir"])
    sys.path.insert(0, CONFIG["work_dir"])
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

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
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


def _reap(wait: float = 0.0) -> None:
    """Collect the cell's finished child processes (zombies would count against the process limit), waiting
    up to `wait` seconds for the ones just killed.

    (A subprocess.Popen finished between cells then reports returncode 0 from wait(): the price of that.)
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def _kill_others() -> None:
    """Kill every other process the cell left behind (after a timeout)."""
    if CONFIG.get("pid_namespace"):
        for _ in range(20):  # a fork bomb may still be forking while we kill
            try:
                os.kill(-1, signal.SIGKILL)  # in our own pid namespace: all but init and ourselves
            except OSError:
                break
        _reap(1.0)
        return
    pgid = os.getpgid(0)
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == KERNEL_PID:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:
                os.kill(int(name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass
    _reap(1.0)


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


def _save_figures(cell: int) -> list[str]:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    saved = []
    try:
        for k, num in enumerate(plt.get_fignums(), 1):
            path = os.path.join(CONFIG["work_dir"], f"figure_{cell}_{k}.png")
            plt.figure(num).savefig(path, format="png", dpi=100, bbox_inches="tight")
            saved.append(path)
    finally:
        plt.close("all")
    return saved


def run_cell(code: str, cell: int, timeout: float, namespace: dict, max_output: int) -> dict:
    """Execute one cell in `namespace`; the reply dict (never raises, never returns in a forked child)."""
    budget = _Budget(max_output)
    out, err = _CappedWriter(budget), _CappedWriter(budget)
    reply: dict = {"result": None, "error": None, "error_kind": None, "figures": []}
    filename = f"<cell-{cell}>"
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            tree = ast.parse(code, filename)
        except (SyntaxError, ValueError) as e:
            reply["error"] = _short("".join(traceback.format_exception_only(type(e), e)).strip())
            reply["error_kind"] = "syntax"
            return reply
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
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
        _reap()
        try:
            reply["figures"] = _save_figures(cell)
        except Exception as e:  # a figure that cannot be drawn must not lose the rest of the reply
            reply["stderr_extra"] = f"(figures could not be saved: {type(e).__name__}: {e})"
        reply["stdout"], reply["stderr"] = out.text(), err.text() + reply.pop("stderr_extra", "")
        reply["dropped"] = budget.dropped
    return reply


def _send(fd: int, obj: dict) -> None:
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    while data:
        data = data[os.write(fd, data) :]


def main() -> None:
    inp, out, status = _setup()
    status["ready"] = True
    _send(out, status)
    namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    requests = os.fdopen(inp, "rb")
    for line in requests:
        try:
            req = json.loads(line)
        except ValueError:
            _send(out, {"error": "bad request", "error_kind": "protocol"})
            continue
        try:
            reply = run_cell(req["code"], int(req["cell"]), float(req["timeout"]), namespace, int(req["max_output"]))
        except MemoryError:
            reply = {"error": "MemoryError while preparing the reply.", "error_kind": "memory"}
        _send(out, reply)


main()
