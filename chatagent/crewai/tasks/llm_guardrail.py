"""`LLMGuardrail(description, llm)`: a requirement the task's answer is judged by, by a model (a text guardrail
judged by the given model instead of the agent's)."""

from __future__ import annotations

from typing import Any

from chatagent.agents.basic import BasicAgent
from chatagent.agents.teams.task import JUDGE
from chatagent.crewai.llm import model_config
from chatagent.tools.arguments import ToolArgumentError, parse_json


class LLMGuardrail:
    def __init__(self, description: str, llm: Any = None) -> None:
        if not isinstance(description, str) or not description.strip():
            raise ValueError("an LLMGuardrail needs a description of what a good answer is")
        self.description = description
        self.llm = llm

    def __call__(self, output: Any) -> tuple[bool, Any]:
        judge = BasicAgent(llm=model_config(self.llm), name="guardrail")
        ask = [{"role": "user", "content": JUDGE.format(requirement=self.description, answer=output.raw)}]
        reply = judge.run_nonstream(ask)
        try:
            verdict = parse_json(str(reply[-1]["content"])) if reply else None
        except ToolArgumentError:
            verdict = None
        if not isinstance(verdict, dict) or not isinstance(verdict.get("valid"), bool):
            return False, f"the check of '{self.description}' gave no verdict; make the answer meet it clearly"
        return verdict["valid"], output.raw if verdict["valid"] else str(verdict.get("feedback") or self.description)


__all__ = ["LLMGuardrail"]
