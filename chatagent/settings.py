"""The defaults chatagent runs with, under Qwen-Agent's `qwen_agent.settings` names.

They are read from where each default is defined, so they are always what chatagent really uses; change
a default where it is set per object (`FnCallAgent(max_llm_calls=...)`, `generate_cfg['max_input_tokens']`,
`Assistant(rag_cfg={'max_ref_token': ...})`, `CHATAGENT_WORKSPACE`).
"""

from __future__ import annotations

from chatagent.agents.assistant import DEFAULT_MAX_REF_TOKEN
from chatagent.agents.fncall import MAX_LLM_CALLS
from chatagent.llm.base import DEFAULT_MAX_INPUT_TOKENS
from chatagent.utils.workspace import workspace_root

MAX_LLM_CALL_PER_RUN: int = MAX_LLM_CALLS
DEFAULT_WORKSPACE: str = str(workspace_root())

__all__ = ["DEFAULT_MAX_INPUT_TOKENS", "DEFAULT_MAX_REF_TOKEN", "DEFAULT_WORKSPACE", "MAX_LLM_CALL_PER_RUN"]
