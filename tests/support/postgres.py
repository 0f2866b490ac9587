"""A throwaway PostgreSQL server for tests: `initdb` and `pg_ctl` (Debian's postgresql package) make a cluster on a
free port under a temporary directory; `halt()` stops the server keeping its data (the port then refuses) and
`resume()` starts it again on the same port; `stop()` ends its processes and removes the directory.

Debian bookworm's PostgreSQL has no pgvector; the `pgserver` wheel (the dev extra) bundles a PostgreSQL 16 with
pgvector, whose programs `PostgresCluster(bin_dir=pgvector_bin_dir())` runs the same way.

PostgreSQL refuses to run as root, so as root the cluster belongs to, and runs as, the `postgres` system user that
Debian's package creates (through `runuser`). Each test gets its own schema (`new_store_url()`), so tests share
the server but never each other's tables.

    with PostgresCluster().start() as pg:
        url = pg.new_store_url()           # postgresql://postgres@127.0.0.1:PORT/postgres?options=-csearch_path%3Dt1
        pg.admin("SELECT 1")
"""

from __future__ import annotations

import glob
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

OWNER = "postgres"
_schemas = itertools.count(1)


def default_signals() -> None:
    """preexec_fn for children: default handling of SIGINT and SIGTERM, whatever the test runner set."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def find_binary(name: str, bin_dir: Path | None = None) -> str | None:
    """A PostgreSQL server program from `bin_dir`, else Debian's (/usr/lib/postgresql/<version>/bin, newest first)."""
    if bin_dir is not None:
        return str(bin_dir / name) if (bin_dir / name).is_file() else None
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]), reverse=True)
    return found[0] if found else shutil.which(name)


def pgvector_bin_dir() -> Path | None:
    """The programs of the PostgreSQL with pgvector that the `pgserver` wheel bundles (found, not imported), or None."""
    spec = importlib.util.find_spec("pgserver")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(root) / "pginstall" / "share" / "postgresql" / "extension" / "vector.control").is_file():
            return Path(root) / "pginstall" / "bin"
    return None


def unavailable(bin_dir: Path | None = None) -> str | None:
    """Why a cluster (of `bin_dir`'s programs, else Debian's) cannot be made here, or None."""
    if find_binary("initdb", bin_dir) is None or find_binary("pg_ctl", bin_dir) is None:
        if bin_dir is not None:
            return f"no PostgreSQL programs in {bin_dir}"
        return "PostgreSQL is not installed (Debian's postgresql package; scripts/setup.sh installs it as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OWNER)
        except KeyError:
            return f"running as root and there is no {OWNER!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'chatagent[postgres]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """One PostgreSQL server in a temporary directory (see the module docstring)."""

    def __init__(self, fsync: bool = False, bin_dir: Path | None = None) -> None:
        self.fsync = fsync  # off for tests (faster, nothing to keep); on for benchmarks
        self.bin_dir = bin_dir  # whose programs: Debian's when None
        self.dir = Path(tempfile.mkdtemp(prefix="chatagent-pg-"))
        self.data = self.dir / "data"
        self.port = 0
        self._as_owner = os.geteuid() == 0
        if self._as_owner:
            info = pwd.getpwnam(OWNER)
            os.chown(self.dir, info.pw_uid, info.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = ["runuser", "-u", OWNER, "--", *cmd] if self._as_owner else list(cmd)
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, preexec_fn=default_signals, cwd=self.dir
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done

    def start(self) -> Self:
        try:
            initdb = find_binary("initdb", self.bin_dir)
            self._run(initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
            for attempt in range(3):  # the free port may be taken between finding it and binding it
                self.port = free_port()
                try:
                    self.resume()
                    break
                except RuntimeError:
                    if attempt == 2:
                        raise
        except BaseException:
            self.stop()
            raise
        return self

    def admin(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one statement as the superuser (autocommit); its rows."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def new_store_url(self) -> str:
        """The URL of a store in a new, empty schema of its own."""
        schema = f"t{next(_schemas)}_{os.getpid()}"
        self.admin(f"CREATE SCHEMA {schema}")
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def terminate_clients(self) -> int:
        """Cut every other client's connection (what a network failure or a server restart does to them)."""
        rows = self.admin(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return int(rows[0][0])

    def halt(self) -> None:
        """Stop the server (immediately), keeping its data: its port refuses connections until `resume()`."""
        self._run(find_binary("pg_ctl", self.bin_dir), "-D", str(self.data), "-m", "immediate", "-w", "-t", "60",
                  "stop")  # fmt: skip

    def resume(self) -> None:
        """Start the server on `self.port` (again, on the same data, after `halt()`)."""
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync={'on' if self.fsync else 'off'} " \
            "-c max_connections=200 -c shared_buffers=16MB"  # fmt: skip
        self._run(find_binary("pg_ctl", self.bin_dir), "-D", str(self.data), "-l", str(self.dir / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")  # fmt: skip

    def stop(self) -> None:
        """Stop the server (immediately) and remove its directory."""
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            try:
                self._run(
                    find_binary("pg_ctl", self.bin_dir),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "-t",
                    "30",
                    "stop",
                )
            except (RuntimeError, subprocess.TimeoutExpired):
                self._kill(pid_file)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _kill(self, pid_file: Path) -> None:
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.05)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
