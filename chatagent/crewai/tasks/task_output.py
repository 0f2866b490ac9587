"""`crewai.tasks.task_output.TaskOutput`: chatagent's TaskOutput (description, raw, pydantic, json_dict, agent,
summary, output_format, to_dict())."""

from chatagent.agents.teams.task import TaskOutput

__all__ = ["TaskOutput"]
