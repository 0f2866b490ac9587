"""`BaseFnCallModel`, at Qwen-Agent's path (`qwen_agent.llm.function_calling`): the base of a model backend whose
server takes no tools. Subclass it, implement Qwen-Agent's `_chat_stream(messages, delta_stream, generate_cfg)`
(whole lists, each the reply so far) and `_chat_no_stream(messages, generate_cfg)`, register it with
`register_llm`, and the tools an agent gives reach the model through the prompt (`generate_cfg['fncall_prompt_type']`,
'nous' by default, or 'qwen'), its calls parsed back (see `chatagent.llm.qwen_backend`, `chatagent.llm.fncall_prompt`).
"""

from __future__ import annotations

from chatagent.llm.base import BaseChatModel


class BaseFnCallModel(BaseChatModel):
    """A backend that calls tools through the prompt (see the module docstring)."""

    native_tools = False


__all__ = ["BaseFnCallModel"]
