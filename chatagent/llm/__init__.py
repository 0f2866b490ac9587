"""Model backends behind one interface: `get_chat_model(cfg).chat(messages, functions, stream=...)`."""

from chatagent.errors import ModelServiceError
from chatagent.llm.base import BaseChatModel, Usage
from chatagent.llm.registry import LLM_REGISTRY, default_llm_config, get_chat_model, register_llm
from chatagent.llm.scripted import Reply, ScriptedLLM, tool_call
from chatagent.llm.settings import DEFAULT_TOOL_CHOICE, ToolChoice

__all__ = [
    "BaseChatModel",
    "DEFAULT_TOOL_CHOICE",
    "LLM_REGISTRY",
    "ModelServiceError",
    "Reply",
    "ScriptedLLM",
    "ToolChoice",
    "Usage",
    "default_llm_config",
    "get_chat_model",
    "register_llm",
    "tool_call",
]
