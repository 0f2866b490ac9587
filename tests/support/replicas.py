"""Three `chatagent serve` processes on one PostgreSQL behind HAProxy (Debian's haproxy), for the load-balancer
tests and bench/scale.py: `Replicas(...).start()` starts them and the balancer; `kill(i)`, `restart(i)`,
`terminate(i)` act on one; `close()` stops everything it started.

HAProxy checks `/readyz` of each replica every 300 ms (two failures, or no answer within 5 s, mark it down; two
successes up again). A replica drains for 15 s after SIGTERM: longer than the 10.6 s the balancer takes at worst to
see it, so that a loaded machine, where checks answer late, still has the balancer stop first. It sends
each request to the next replica up, retries a request whose connection failed on another replica, and names
the replica that answered in the `X-Replica` response header.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support import processes
from tests.support.postgres import free_port

HAPROXY_CONFIG = """
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    timeout http-request 30s
    timeout check 5s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    option http-server-close
frontend chat
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    http-response set-header X-Replica %s
{servers}
"""


def unavailable() -> str | None:
    """Why the balancer cannot run here, or None."""
    if shutil.which("haproxy") is None:
        return "HAProxy is not installed (Debian's haproxy package; scripts/setup.sh installs it as root)"
    return None


class Replicas:
    """`n` serve processes of `agent` (MODULE:FUNCTION) on `store`, behind HAProxy; `env` is given to them.
    `stores`, when given, is each replica's own URL of that store (one reaching it through a `TcpRelay`); with
    `store_from_env` a replica is told it by $CHATAGENT_SESSION_STORE instead of `--store`."""

    def __init__(self, store: str, agent: str, directory: Path, env: dict[str, str], n: int = 3,
                 api_key: str = "replica-key", extra: tuple[str, ...] = (), stores: tuple[str, ...] = (),
                 store_from_env: bool = False) -> None:  # fmt: skip
        self.store, self.agent, self.dir, self.env, self.n = store, agent, directory, env, n
        self.api_key, self.extra = api_key, extra
        self.stores, self.store_from_env = stores or (store,) * n, store_from_env
        self.ports = [free_port() for _ in range(n)]
        self.port = free_port()
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.balancer: subprocess.Popen | None = None
        (directory / "keys").write_text(api_key + "\n")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def replica_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, deadline: float = 180.0) -> Replicas:
        for i in range(self.n):
            self._spawn(i)
        for i in range(self.n):
            self.wait_ready(i, deadline)
        servers = "\n".join(f"    server r{i} 127.0.0.1:{p} check inter 300ms fall 2 rise 2"
                            for i, p in enumerate(self.ports))  # fmt: skip
        config = self.dir / "haproxy.cfg"
        config.write_text(HAPROXY_CONFIG.format(port=self.port, servers=servers))
        with open(self.dir / "haproxy.log", "w") as log:  # the child has its own copy of the descriptor
            self.balancer = processes.popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                            stderr=log)  # fmt: skip
        wait_until(
            lambda: httpx.get(self.url + "/readyz", timeout=5).status_code == 200, deadline, "the balancer ready"
        )
        return self

    def _spawn(self, i: int) -> None:
        where = {"CHATAGENT_SESSION_STORE": self.stores[i]} if self.store_from_env else {}
        argv = [sys.executable, "-m", "chatagent", "serve", "--agent", self.agent,
                *([] if where else ["--store", self.stores[i]]), "--port", str(self.ports[i]), "--api-key-file", str(self.dir / "keys"), "--drain-delay", "15",
                "--grace", "60", "--max-concurrency", "1000", *self.extra]  # fmt: skip
        with open(self.dir / f"replica{i}.log", "a") as log:
            self.procs[i] = processes.popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **self.env, **where},
                                            cwd=str(Path(__file__).resolve().parents[2]))  # fmt: skip

    def wait_ready(self, i: int, deadline: float = 180.0) -> None:
        url = self.replica_url(i) + "/readyz"

        def ready() -> bool:
            proc = self.procs[i]
            assert proc is not None and proc.poll() is None, (self.dir / f"replica{i}.log").read_text()[-3000:]
            return httpx.get(url, timeout=5).status_code == 200

        wait_until(ready, deadline, f"replica {i} ready")

    def kill(self, i: int) -> None:
        """SIGKILL replica `i` and reap it."""
        proc = self.procs[i]
        assert proc is not None
        proc.kill()
        proc.wait(60)

    def terminate(self, i: int, deadline: float = 120.0) -> int:
        """SIGTERM replica `i`; its exit status once it drained and stopped."""
        proc = self.procs[i]
        assert proc is not None
        proc.terminate()
        return proc.wait(deadline)

    def restart(self, i: int) -> None:
        self._spawn(i)
        self.wait_ready(i)

    def close(self) -> None:
        for proc in [*self.procs, self.balancer]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(60)


def wait_until(check: Callable[[], bool], deadline: float, what: str) -> None:
    """Return once `check()` is true (an HTTP error counts as not yet); AssertionError naming `what` after `deadline` s."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {deadline} s")
