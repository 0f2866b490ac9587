"""`chatagent memory list|forget`: a user's memories, newest first, and deleting them, by the real command."""

from __future__ import annotations

import sys
from pathlib import Path

from chatagent import LongTermMemory
from tests.support import processes


def memory_cli(*args: str, store: str) -> tuple[int, str, str]:
    out = processes.run(
        [sys.executable, "-m", "chatagent", "memory", *args, "--store", store],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return out.returncode, out.stdout, out.stderr


def test_list_and_forget_one_users_memories(tmp_path: Path) -> None:
    store = str(tmp_path / "memory.db")
    alice = LongTermMemory(user="alice", store=store, embedder=None)
    kept = alice.remember("Alice likes green tea.", scope="food")
    gone = alice.remember("Alice's locker code is 4711.\x1b[2J")  # a control sequence from the store
    alice.for_user("bob").remember("Bob likes coffee.")

    code, out, _ = memory_cli("list", "--user", "alice", store=store)
    assert code == 0 and kept.id in out and gone.id in out and "Bob" not in out
    assert "\x1b" not in out and "food" in out

    code, _, err = memory_cli("forget", gone.id, "--user", "bob", store=store)  # not bob's: refused
    assert code != 0 and "no memory" in err
    code, out, _ = memory_cli("forget", gone.id, "--user", "alice", store=store)
    assert code == 0 and [r.id for r in alice.list()] == [kept.id]

    code, _, err = memory_cli("forget", "--user", "alice", store=store)
    assert code != 0 and "--all" in err
    code, out, _ = memory_cli("forget", "--all", "--user", "alice", store=store)
    assert code == 0 and alice.list() == [] and len(alice.for_user("bob").list()) == 1
    code, _, err = memory_cli("list", "--user", "alice", store=store)
    assert code == 0 and "no memories" in err
