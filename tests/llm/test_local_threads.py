"""The embedded model's threads (issue 43.7): one per physical core the process may run on, one left for the caller
on a machine of up to 4 cores, as llama.cpp advises; the config's `threads` and `CHATAGENT_LOCAL_THREADS` override it.
Every core on a busy 2-core machine made each token wait for whatever else ran (45 s for a 64-token answer, 5.7 s
with one thread)."""

from __future__ import annotations

import os
import sys

import pytest

from chatagent import ModelServiceError
from chatagent.llm.local.model import THREADS_ENV, default_threads, physical_cores
from tests.support import processes

pytestmark = pytest.mark.timeout(120)


def test_the_default_is_the_physical_cores_less_one_on_a_small_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    cores = physical_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
    assert default_threads() == (max(1, cores - 1) if cores <= 4 else cores)
    if 2 <= len(os.sched_getaffinity(0)) <= 4:  # this machine: fewer threads than CPUs (every CPU before)
        assert default_threads() < len(os.sched_getaffinity(0))


def test_the_default_follows_the_processs_affinity() -> None:
    """A process pinned to one CPU (taskset, a container's cpuset) runs the model on one thread."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from chatagent.llm.local.model import default_threads; print(default_threads())"
    )
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    out = processes.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_the_environment_sets_it_and_a_bad_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "3")
    assert default_threads() == 3
    for bad in ("0", "many", "-2"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ModelServiceError, match=THREADS_ENV):
            default_threads()
