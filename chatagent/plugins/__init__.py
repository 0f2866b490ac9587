"""Plugins: the base class and the hooks (`chatagent.run.plugin`), and the built-in ones:
`guardrails` (InputGuardrail, OutputGuardrail, TextPolicy, LLMJudge) and `structured` (response_format)."""

from chatagent.run.plugin import BLOCKED_BY, BLOCKED_REASON, HOOKS, Blocked, Plugin, PluginError, Plugins, Retry

__all__ = ["BLOCKED_BY", "BLOCKED_REASON", "Blocked", "HOOKS", "Plugin", "PluginError", "Plugins", "Retry"]
