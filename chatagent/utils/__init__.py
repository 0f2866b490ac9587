"""Small helpers for users of chatagent (Qwen-Agent's `qwen_agent.utils` names live here too)."""
