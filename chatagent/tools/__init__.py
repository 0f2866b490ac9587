"""Tools: declare them (BaseTool, @tool, register_tool), and the built-ins, registered by name.

Importing this package registers the built-in tools lazily: their modules are imported only when a
tool is used by name.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

from chatagent.tools.arguments import ToolArgumentError, parse_arguments, unknown_tool_message, validate_arguments
from chatagent.tools.base import TOOL_REGISTRY, TOOL_SOURCES, BaseTool, make_tools, register_tool, tool_class
from chatagent.tools.from_function import FunctionTool, function_schema, tool
from chatagent.utils.lazy import lazy_exports

# built-in tool name -> the module that registers it when imported (only those whose module exists)
BUILTIN_TOOLS: dict[str, str] = {
    "code_interpreter": "chatagent.tools.code_interpreter",
    "retrieval": "chatagent.tools.retrieval",
    "doc_parser": "chatagent.tools.doc_parser",
    "simple_doc_parser": "chatagent.tools.simple_doc_parser",
    "storage": "chatagent.tools.storage",
    "keyword_search": "chatagent.tools.search_tools",
    "vector_search": "chatagent.tools.search_tools",
    "hybrid_search": "chatagent.tools.search_tools",
    "front_page_search": "chatagent.tools.search_tools",
    "extract_doc_vocabulary": "chatagent.tools.extract_doc_vocabulary",
    "python_executor": "chatagent.tools.python_executor",
    "web_extractor": "chatagent.tools.web_tools",
    "web_search": "chatagent.tools.web_tools",
    "image_search": "chatagent.tools.web_tools",
    "image_gen": "chatagent.tools.service_tools",
    "amap_weather": "chatagent.tools.service_tools",
    "image_zoom_in_tool": "chatagent.tools.image_zoom_in",
}

# Qwen-Agent's tool classes, importable from here as from `qwen_agent.tools` (their modules load on first use)
_EXPORTS: dict[str, str] = {
    "AmapWeather": "chatagent.tools.service_tools",
    "ExtractDocVocabulary": "chatagent.tools.extract_doc_vocabulary",
    "ImageGen": "chatagent.tools.service_tools",
    "ImageSearch": "chatagent.tools.web_tools",
    "ImageZoomInToolQwen3VL": "chatagent.tools.image_zoom_in",
    "PythonExecutor": "chatagent.tools.python_executor",
    "WebExtractor": "chatagent.tools.web_tools",
    "WebSearch": "chatagent.tools.web_tools",
    "BaseToolWithFileAccess": "chatagent.tools.file_access",
    "CodeInterpreter": "chatagent.tools.code_interpreter",
    "DocParser": "chatagent.tools.doc_parser",
    "FrontPageSearch": "chatagent.tools.search_tools",
    "HybridSearch": "chatagent.tools.search_tools",
    "KeywordSearch": "chatagent.tools.search_tools",
    "Retrieval": "chatagent.tools.retrieval",
    "SimpleDocParser": "chatagent.tools.simple_doc_parser",
    "Storage": "chatagent.tools.storage",
    "VectorSearch": "chatagent.tools.search_tools",
}


def _register_builtins() -> None:
    for name, module in BUILTIN_TOOLS.items():
        if name not in TOOL_REGISTRY and find_spec(module) is not None:
            TOOL_REGISTRY[name] = module


_register_builtins()

__all__ = [
    "AmapWeather",
    "BUILTIN_TOOLS",
    "ExtractDocVocabulary",
    "ImageGen",
    "ImageSearch",
    "ImageZoomInToolQwen3VL",
    "PythonExecutor",
    "WebExtractor",
    "WebSearch",
    "BaseToolWithFileAccess",
    "CodeInterpreter",
    "DocParser",
    "FrontPageSearch",
    "HybridSearch",
    "KeywordSearch",
    "Retrieval",
    "SimpleDocParser",
    "Storage",
    "VectorSearch",
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

if TYPE_CHECKING:
    from chatagent.tools.code_interpreter import CodeInterpreter
    from chatagent.tools.doc_parser import DocParser
    from chatagent.tools.extract_doc_vocabulary import ExtractDocVocabulary
    from chatagent.tools.file_access import BaseToolWithFileAccess
    from chatagent.tools.image_zoom_in import ImageZoomInToolQwen3VL
    from chatagent.tools.python_executor import PythonExecutor
    from chatagent.tools.retrieval import Retrieval
    from chatagent.tools.search_tools import FrontPageSearch, HybridSearch, KeywordSearch, VectorSearch
    from chatagent.tools.service_tools import AmapWeather, ImageGen
    from chatagent.tools.simple_doc_parser import SimpleDocParser
    from chatagent.tools.storage import Storage
    from chatagent.tools.web_tools import ImageSearch, WebExtractor, WebSearch

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
