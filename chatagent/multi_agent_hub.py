"""Qwen-Agent's `qwen_agent.multi_agent_hub` path: see `chatagent.agents.hub`."""

from chatagent.agents.hub import MultiAgentHub

__all__ = ["MultiAgentHub"]
