"""`storage`: Qwen-Agent's key-value store of texts in files, for agents and code that keep data between calls.

    db = Storage({'storage_root_path': '/tmp/notes'})
    db.call({'operate': 'put', 'key': '/trips/paris', 'value': 'Louvre on Monday'})   # 'Successfully saved ...'
    db.get('trips/paris')              # the text; KeyNotExistsError when there is none
    db.call({'operate': 'scan', 'key': '/trips'})   # '/paris: Louvre on Monday', one key a line

A key is a path under the root (default `<workspace>/tools/storage`); one that would leave it (`../x`, an absolute
path after the root's `/`) is refused with ValueError, whoever gives it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chatagent.errors import ChatAgentError
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.utils.workspace import private_dirs, workspace_root

__all__ = ["KeyNotExistsError", "Storage"]


class KeyNotExistsError(ChatAgentError, ValueError):
    """`get` of a key that holds nothing."""


@register_tool("storage")
class Storage(BaseTool):
    """Texts by key (a path) under a root directory: put, get, delete, scan."""

    description = "Store and read data by key: put, get, delete, or scan (list) the keys under a path."
    parameters = {
        "type": "object",
        "properties": {
            "operate": {"type": "string", "enum": ["put", "get", "delete", "scan"], "description": "What to do."},
            "key": {"type": "string", "default": "/", "description": "The data's path, such as /notes/today."},
            "value": {"type": "string", "description": "The data to store (for put only)."},
        },
        "required": ["operate"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.root = os.fspath(self.cfg.get("storage_root_path") or workspace_root() / "tools" / self.name)
        private_dirs(Path(self.root))

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        args = self.parse_params(params)
        operate, key = args["operate"], str(args.get("key", "/"))
        if operate == "put":
            if "value" not in args:
                raise ValueError("storage: 'put' needs a 'value'")
            return self.put(key, str(args["value"]))
        if operate == "get":
            return self.get(key)
        if operate == "delete":
            return self.delete(key)
        return self.scan(key)

    def put(self, key: str, value: str, path: str | None = None) -> str:
        target = self._path(key, path)
        private_dirs(target.parent)
        target.write_text(value, encoding="utf-8")
        return f"Successfully saved {key.lstrip('/')}."

    def get(self, key: str, path: str | None = None) -> str:
        target = self._path(key, path)
        if not target.is_file():
            raise KeyNotExistsError(f"Get Failed: {key.lstrip('/')} does not exist")
        return target.read_text(encoding="utf-8")

    def delete(self, key: str, path: str | None = None) -> str:
        target = self._path(key, path)
        if not target.is_file():
            return f"Delete Failed: {key.lstrip('/')} does not exist"
        target.unlink()
        return f"Successfully deleted {key.lstrip('/')}"

    def scan(self, key: str, path: str | None = None) -> str:
        target = self._path(key, path)
        if not target.exists():
            return f"Scan Failed: {key.lstrip('/')} does not exist."
        if not target.is_dir():
            return "Scan Failed: The scan operation requires passing in a folder path as the key."
        lines = [
            f"/{file.relative_to(target).as_posix()}: {file.read_text(encoding='utf-8')}"
            for file in sorted(target.rglob("*"))
            if file.is_file()
        ]
        return "\n".join(lines)

    def _path(self, key: str, root: str | None) -> Path:
        base = Path(root or self.root).resolve()
        target = (base / key.lstrip("/")).resolve()
        if target != base and base not in target.parents:
            raise ValueError(f"storage: the key {key!r:.80} leaves the storage directory")
        return target
