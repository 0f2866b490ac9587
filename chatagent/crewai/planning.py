"""`Crew(planning=True)`: before the crew starts, a planner (on `planning_llm`, else the first agent's model)
writes a step-by-step plan for each task, and each task is given its plan with its description (CrewAI's
CrewPlanner, in chatagent: a one-task crew whose answer is validated against the plans' model)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from chatagent.agents.teams.crew import Crew as ChatCrew
from chatagent.agents.teams.task import Task as ChatTask
from chatagent.crewai.agent import Agent
from chatagent.errors import ChatAgentError


class PlanPerTask(BaseModel):
    task_number: int = Field(description="The 1-indexed task number this plan corresponds to", ge=1)
    task: str = Field(description="The task for which the plan is created")
    plan: str = Field(description="The step by step plan on how the agents can execute their tasks")


class PlannerTaskPydanticOutput(BaseModel):
    list_of_plans_per_task: list[PlanPerTask] = Field(description="A plan for each task")


PLANNER_TASK = (
    "Based on these tasks summary: {summary} \n Create the most descriptive plan based on the tasks descriptions, "
    "tools available, and agents' goals for them to execute their goals with perfection."
)


def _summary(crew: Any, inputs: dict[str, Any]) -> str:
    parts = []
    for k, task in enumerate(crew.tasks):
        agent = task.agent
        tools = [getattr(t, "name", str(t)) for t in (getattr(agent, "tools", None) or [])] if agent else []
        description, expected = task.filled(inputs)
        parts.append(f'Task Number {k + 1} - {description}\n"task_description": {description}\n'
                     f'"task_expected_output": {expected}\n"agent": {agent.role if agent else None}\n'
                     f'"agent_goal": {agent.goal if agent else None}\n'
                     f'"task_tools": {tools or "agent has no tools"}')  # fmt: skip
    return "\n\n".join(parts)


def plan_tasks(crew: Any, inputs: dict[str, Any]) -> None:
    """Write each task's plan after its description (see the module docstring)."""
    llm = crew.planning_llm if crew.planning_llm is not None else crew.agents[0].llm_setting if crew.agents \
        else None  # fmt: skip
    planner = Agent(
        role="Task Execution Planner",
        backstory="Planner agent for crew planning",
        llm=llm,
        goal="Your goal is to create an extremely detailed, step-by-step plan based on the tasks and "
        "tools available to each agent so that they can perform the tasks in an exemplary manner",
    )
    task = ChatTask(PLANNER_TASK.format(summary=_summary(crew, inputs)),
                    "Step by step plan on how the agents can execute their tasks using the available tools with mastery",
                    agent=planner, output_pydantic=PlannerTaskPydanticOutput)  # fmt: skip
    out = ChatCrew([planner], [task], name="planner").kickoff()
    plans = out.pydantic
    if not isinstance(plans, PlannerTaskPydanticOutput):
        raise ChatAgentError("the crew's planner gave no plan")
    for plan in plans.list_of_plans_per_task:
        if 1 <= plan.task_number <= len(crew.tasks):
            target = crew.tasks[plan.task_number - 1]
            target.description = f"{target.description}\n\n{plan.plan}"


__all__ = ["PlanPerTask", "PlannerTaskPydanticOutput", "plan_tasks"]
