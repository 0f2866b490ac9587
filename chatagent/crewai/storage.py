"""Where the face keeps what CrewAI keeps in its storage folder: the task outputs of the last kickoff (for
`Crew.replay` and `chatagent replay -t ID`), in `$CREWAI_STORAGE_DIR` or else `./.crewai` of the project."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KICKOFF_FILE = "latest_kickoff_task_outputs.json"


def storage_dir() -> Path:
    """$CREWAI_STORAGE_DIR, else `.crewai` in the current folder (the project's)."""
    given = os.environ.get("CREWAI_STORAGE_DIR")
    return Path(given) if given else Path.cwd() / ".crewai"


def save_kickoff(inputs: dict[str, Any] | None, outputs: Sequence[tuple[str, Any]]) -> None:
    """Keep the inputs and each task's (id, TaskOutput) of a kickoff; `inputs=None` forgets the last one."""
    path = storage_dir() / KICKOFF_FILE
    if inputs is None:
        path.unlink(missing_ok=True)
        return
    tasks = [{"task_id": task_id, "description": o.description, "raw": o.raw, "agent": o.agent,
              "json_dict": o.json_dict, "expected_output": o.expected_output, "name": o.name}
             for task_id, o in outputs]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=".kickoff-", suffix=".tmp"
    )  # one per writer: crews may end at once
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps({"inputs": inputs, "tasks": tasks}, ensure_ascii=False, default=str))
    os.replace(tmp, path)


def load_kickoff() -> dict[str, Any] | None:
    """The last kickoff kept by save_kickoff ({'inputs', 'tasks': [{'task_id', 'raw', ...}]}), or None."""
    path = storage_dir() / KICKOFF_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


__all__ = ["KICKOFF_FILE", "load_kickoff", "save_kickoff", "storage_dir"]
