"""CrewAI's docs (tasks.mdx, "Conditional Tasks"): a task that runs only when the previous output asks for it."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.tasks.conditional_task import ConditionalTask
from chatagent.crewai.tasks.task_output import TaskOutput

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": "Found 12 events."}, {"say": "Final: 12 events."}]


def needs_more(output: TaskOutput) -> bool:
    return "fewer than 10" in output.raw


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    scout = Agent(role="Scout", goal="Find events", backstory="Thorough.", llm=llm)
    find = Task(description="Find events in Lyon.", expected_output="How many.", agent=scout)
    more = ConditionalTask(
        description="Find more events.", expected_output="More events.", agent=scout, condition=needs_more
    )
    report = Task(description="Report the events.", expected_output="One line.", agent=scout)
    result = Crew(agents=[scout], tasks=[find, more, report]).kickoff()
    assert result.raw == "Final: 12 events.", result.raw
    assert len(result.tasks_output) == 3
    assert result.tasks_output[1].raw == "", result.tasks_output[1].raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
