"""BaseTool, the tool registry, and turning a `function_list` into tools: the names tools have always imported
from here. BaseTool lives in `chatagent.tools.tool`, the registry and `make_tools` in `chatagent.tools.registry`.

    @register_tool('get_weather')
    class GetWeather(BaseTool):
        description = 'Current weather for a city.'
        parameters = {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}

        def call(self, params, **kwargs):
            args = self.parse_params(params)   # or json5.loads(params), as Qwen-Agent tools do
            return f"Sunny in {args['city']}"
"""

from __future__ import annotations

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
