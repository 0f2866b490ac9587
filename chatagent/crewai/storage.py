"""Where the face keeps what CrewAI keeps in its storage folder: the task outputs of the last kickoff (for
`Crew.replay` and `chatagent replay -t ID`), the crew's memory, the flows' states. As CrewAI does, one folder per
project (the current folder): `$CREWAI_STORAGE_DIR` when set, else one in chatagent's workspace named from the
project folder's path; it is readable by this user alone."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatagent.utils.workspace import private_dirs, workspace_dir, write_atomic

KICKOFF_FILE = "latest_kickoff_task_outputs.json"


def storage_dir() -> Path:
    """$CREWAI_STORAGE_DIR, else the current folder's (the project's) in the workspace; made if missing."""
    given = os.environ.get("CREWAI_STORAGE_DIR")
    if given:
        return private_dirs(Path(given).expanduser())
    project = hashlib.sha256(str(Path.cwd().resolve()).encode()).hexdigest()[:16]
    return workspace_dir("crewai", f"p_{project}")


def save_kickoff(inputs: dict[str, Any] | None, outputs: Sequence[tuple[str, Any]]) -> None:
    """Keep the inputs and each task's (id, TaskOutput) of a kickoff; `inputs=None` forgets the last one."""
    path = storage_dir() / KICKOFF_FILE
    if inputs is None:
        path.unlink(missing_ok=True)
        return
    tasks = [{"task_id": task_id, "description": o.description, "raw": o.raw, "agent": o.agent,
              "json_dict": o.json_dict, "expected_output": o.expected_output, "name": o.name}
             for task_id, o in outputs]  # fmt: skip
    # write_atomic: a temporary file of its own per writer (crews may end at once), then a rename
    write_atomic(path, json.dumps({"inputs": inputs, "tasks": tasks}, ensure_ascii=False, default=str).encode())


def load_kickoff() -> dict[str, Any] | None:
    """The last kickoff kept by save_kickoff ({'inputs', 'tasks': [{'task_id', 'raw', ...}]}), or None."""
    path = storage_dir() / KICKOFF_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


__all__ = ["KICKOFF_FILE", "load_kickoff", "save_kickoff", "storage_dir"]
