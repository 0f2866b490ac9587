"""`crewai.tasks`: TaskOutput, OutputFormat, ConditionalTask, LLMGuardrail."""

from chatagent.crewai.tasks.conditional_task import ConditionalTask
from chatagent.crewai.tasks.llm_guardrail import LLMGuardrail
from chatagent.crewai.tasks.output_format import OutputFormat
from chatagent.crewai.tasks.task_output import TaskOutput

__all__ = ["ConditionalTask", "LLMGuardrail", "OutputFormat", "TaskOutput"]
