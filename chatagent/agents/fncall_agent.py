"""Qwen-Agent's module path for FnCallAgent (`qwen_agent.agents.fncall_agent`); it lives in chatagent.agents.fncall."""

from chatagent.agents.fncall import FnCallAgent

__all__ = ["FnCallAgent"]
