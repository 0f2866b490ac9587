"""`python_executor`: Qwen-Agent's one-shot Python runner (used by its math agents), in chatagent's sandbox.

    PythonExecutor().call({'code': 'print(6 * 7)'})          # ('42', 'Done')
    PythonExecutor().call('```python\\nx = 1 / 0\\n```')      # ('', 'ZeroDivisionError: division by zero')

Each call runs in a fresh sandboxed process (`chatagent.tools.sandbox`, as `code_interpreter`; unlike Qwen-Agent's,
which runs in the host process) and answers Qwen-Agent's pair (result, report): the result is what the code
printed (`get_answer_from_stdout`, the default), else the value of `get_answer_symbol` or of `get_answer_expr`, else
of its last line; the report is 'Done', the error's last line, or 'Timeout Error'. Both are cut to 256 characters
(their middle dropped), as there. Settings: `timeout_length` (seconds, default 20), and `code_interpreter`'s
sandbox settings (`sandbox`, `memory_mb`, ...).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, cast

from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.code_interpreter import CodeInterpreter

__all__ = ["PythonExecutor"]

MAX_CHARS = 256
_FENCED = re.compile(r"```[^\n]*\n(.+?)```", re.S)


@register_tool("python_executor")
class PythonExecutor(BaseTool):
    """Run a piece of Python once, in a fresh sandbox: (result, report)."""

    runs_code = True
    description = "Execute Python code and get what it printed (or its value) and whether it ran."
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code."}},
        "required": ["code"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.timeout_length = float(self.cfg.get("timeout_length", 20))
        self.from_stdout = bool(self.cfg.get("get_answer_from_stdout", True))
        self.answer_symbol: str | None = self.cfg.get("get_answer_symbol")
        self.answer_expr: str | None = self.cfg.get("get_answer_expr")
        settings = {
            k: v for k, v in self.cfg.items() if k not in ("name", "timeout_length") and not k.startswith("get_")
        }
        self._runner = CodeInterpreter({**settings, "timeout": self.timeout_length})
        self.timeout = self._runner.timeout  # the framework's backstop, as code_interpreter's

    def call(self, params: str | JSONObject, **kwargs: Any) -> tuple[str, str]:
        code = _code_of(params)
        if not code.strip():
            return "", ""
        return self.apply(code)

    def apply(self, code: str) -> tuple[str, str]:
        """Run `code` in a new sandbox session, closed after it: (result, report)."""
        last = ""
        if not self.from_stdout:
            if self.answer_symbol:
                last = self.answer_symbol
            elif self.answer_expr:
                last = self.answer_expr
            else:
                *lines, last = code.rstrip().split("\n")
                code = "\n".join(lines)
        session = f"python_executor-{uuid.uuid4().hex}"
        try:
            sandbox = self._runner.sandbox(session)
            reply = sandbox.run(code if not last else f"{code}\n{last}", self.timeout_length)
        finally:
            self._runner.close_session(session)
        error = reply.get("error")
        if error:
            report = "Timeout Error" if reply.get("error_kind") == "timeout" else error.strip().split("\n")[-1]
            return "", truncate(report)
        result = reply.get("stdout", "") if self.from_stdout else reply.get("result") or ""
        return truncate(result.strip()), "Done"

    def close(self) -> None:
        self._runner.close()


def _code_of(params: str | JSONObject) -> str:
    """The code of the call: `{'code': ...}` (a dict or its JSON), else code in a Markdown fence, else the text."""
    if isinstance(params, dict):
        return str(params.get("code", ""))
    try:
        data: Any = json.loads(params)
    except ValueError:
        return _extract_code(params)
    fields: dict[str, Any] = cast("dict[str, Any]", data) if isinstance(data, dict) else {}
    return str(fields["code"]) if "code" in fields else _extract_code(params)


def _extract_code(text: str) -> str:
    """The code in the first Markdown fence of `text`, else `text` itself."""
    fenced = _FENCED.search(text)
    return fenced.group(1) if fenced else text


def truncate(text: str, max_length: int = MAX_CHARS) -> str:
    """`text` with its middle replaced by '...' when longer than `max_length`."""
    half = max_length // 2
    return text if len(text) <= max_length else text[:half] + "..." + text[-half:]
