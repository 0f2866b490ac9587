"""Tools: declare them (BaseTool, @tool, register_tool), and the built-ins, registered by name.

Importing this package registers the built-in tools lazily: their modules are imported only when a
tool is used by name.
"""

from __future__ import annotations

from importlib.util import find_spec

from chatagent.tools.arguments import ToolArgumentError, parse_arguments, unknown_tool_message, validate_arguments
from chatagent.tools.base import TOOL_REGISTRY, TOOL_SOURCES, BaseTool, make_tools, register_tool, tool_class
from chatagent.tools.from_function import FunctionTool, function_schema, tool

# built-in tool name -> the module that registers it when imported (only those whose module exists)
BUILTIN_TOOLS: dict[str, str] = {
    "code_interpreter": "chatagent.tools.code_interpreter",
    "retrieval": "chatagent.tools.retrieval",
    "doc_parser": "chatagent.tools.doc_parser",
}


def _register_builtins() -> None:
    for name, module in BUILTIN_TOOLS.items():
        if name not in TOOL_REGISTRY and find_spec(module) is not None:
            TOOL_REGISTRY[name] = module


_register_builtins()

__all__ = [
    "BUILTIN_TOOLS",
    "BaseTool",
    "FunctionTool",
    "TOOL_REGISTRY",
    "TOOL_SOURCES",
    "ToolArgumentError",
    "function_schema",
    "make_tools",
    "parse_arguments",
    "register_tool",
    "tool",
    "tool_class",
    "unknown_tool_message",
    "validate_arguments",
]
