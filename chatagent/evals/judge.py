"""Judge: a model's verdict on an answer against a rubric, built on the `LLMJudge` guardrail (the model answers
ALLOW or BLOCK: <why>; any other answer fails the case: a judge that cannot judge passes nothing).

    Judge("The answer gives the refund window in days and is polite.", llm={"model": "qwen-plus"})
    evaluate(bot, cases, judge={"model": "qwen-plus"})      # the model of every Judge that names none
"""

from __future__ import annotations

from typing import Any

from chatagent.evals.evaluators import Context, Evaluator, Result
from chatagent.plugins.guardrails import LLMJudge
from chatagent.schema import to_messages

RUBRIC = (
    "The text is an answer to the question below. ALLOW it only if it meets this rubric, BLOCK it otherwise, "
    "saying which part of the rubric it fails.\n\nRubric: {rubric}\n\nQuestion: {question}{expected}"
)


class Judge(Evaluator):
    """The model `llm` (a config dict or a model; None: the evaluation's `judge=`) judges whether the answer meets
    `rubric`, given the case's question and, when it has one, its expected answer."""

    name = "judge"
    checks_answer = True

    def __init__(self, rubric: str, llm: Any = None, *, generate_cfg: dict[str, Any] | None = None) -> None:
        if not isinstance(rubric, str) or not rubric.strip():
            raise ValueError("Judge needs a rubric: what a good answer does")
        self.rubric, self.llm, self.generate_cfg = rubric.strip(), llm, generate_cfg
        self._models: dict[int, Any] = {}

    def evaluate(self, ctx: Context) -> Result:
        llm = self.llm if self.llm is not None else ctx.judge
        if llm is None:
            raise ValueError("Judge needs a model: Judge(rubric, llm=...) or evaluate(..., judge=...)")
        expected = ctx.case.expected
        question = _question(ctx.case.inputs)
        instruction = RUBRIC.format(rubric=self.rubric, question=question,
                                    expected=f"\n\nA correct answer: {expected}" if expected is not None else "")  # fmt: skip
        model = self._models.get(id(llm))
        if model is None:  # built once per model config (LLMJudge builds it from a config)
            model = self._models[id(llm)] = LLMJudge(llm, "").llm
        reason = LLMJudge(model, instruction, generate_cfg=self.generate_cfg)(ctx.text)
        return Result(self.name, reason is None, reason=reason or "")


def _question(inputs: Any) -> str:
    """A case's inputs as the question the judge reads: the text of its (last) message."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, list) and inputs:
        return to_messages(inputs)[-1].text
    return str(inputs)


__all__ = ["RUBRIC", "Judge"]
