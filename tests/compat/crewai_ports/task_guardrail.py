"""CrewAI's docs (tasks.mdx, "Task Guardrails"): a function guardrail sends a failing answer back to the agent."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.tasks.task_output import TaskOutput

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": "This answer is far too long for the limit that the task sets on it."}, {"say": "Short now."}]


def under_five_words(result: TaskOutput):
    if len(result.raw.split()) > 5:
        return (False, "The answer must be at most five words.")
    return (True, result.raw.upper())


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Write briefly", backstory="Terse.", llm=llm)
    task = Task(
        description="Describe rivers.",
        expected_output="A few words.",
        agent=writer,
        guardrail=under_five_words,
        guardrail_max_retries=2,
    )
    result = Crew(agents=[writer], tasks=[task]).kickoff()
    assert result.raw == "SHORT NOW.", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
