"""BaseTool, the tool registry, and turning a `function_list` into tools: the names tools have always imported
from here, as from Qwen-Agent's `qwen_agent/tools/base.py` (BaseToolWithFileAccess too). BaseTool (with an example
of a tool) lives in `chatagent.tools.tool`, the registry and `make_tools` in `chatagent.tools.registry`,
BaseToolWithFileAccess in `chatagent.tools.file_access`.
"""

from __future__ import annotations

from chatagent.tools.file_access import BaseToolWithFileAccess
from chatagent.tools.registry import TOOL_REGISTRY, TOOL_SOURCES, ToolRegistry, make_tools, register_tool, tool_class
from chatagent.tools.tool import (
    TOOL_SETTINGS,
    BaseTool,
    ToolServiceError,
    is_pydantic_model,
    pydantic_errors,
    pydantic_schema,
    result_content,
    schema_from_list,
    validate_with_pydantic,
)

__all__ = [
    "BaseTool",
    "BaseToolWithFileAccess",
    "TOOL_REGISTRY",
    "TOOL_SETTINGS",
    "ToolRegistry",
    "ToolServiceError",
    "TOOL_SOURCES",
    "is_pydantic_model",
    "make_tools",
    "pydantic_errors",
    "pydantic_schema",
    "register_tool",
    "result_content",
    "schema_from_list",
    "tool_class",
    "validate_with_pydantic",
]
