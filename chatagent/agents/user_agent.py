"""Qwen-Agent's module path for UserAgent (`qwen_agent.agents.user_agent`); it lives in chatagent.agents.user."""

from chatagent.agents.user import PENDING_USER_INPUT, UserAgent, is_pending_input, pending_input

__all__ = ["PENDING_USER_INPUT", "UserAgent", "is_pending_input", "pending_input"]
