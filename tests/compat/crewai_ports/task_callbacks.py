"""CrewAI's docs (tasks.mdx "Callback Mechanism", crews.mdx task_callback): each task's output to a callback."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.tasks.task_output import TaskOutput

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": "First answer."}, {"say": "Second answer."}]
SEEN = []


def callback_function(output: TaskOutput) -> None:
    SEEN.append(("task", output.raw, output.agent))


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    worker = Agent(role="Worker", goal="Answer", backstory="Diligent.", llm=llm)
    first = Task(
        description="Answer the first question.", expected_output="One line.", agent=worker, callback=callback_function
    )
    second = Task(description="Answer the second question.", expected_output="One line.", agent=worker)
    crew = Crew(
        agents=[worker],
        tasks=[first, second],
        task_callback=lambda out: SEEN.append(("crew", out.raw, out.summary.split()[0])),
    )
    crew.kickoff()
    assert ("task", "First answer.", "Worker") in SEEN, SEEN
    assert [s for s in SEEN if s[0] == "crew"] == [
        ("crew", "First answer.", "Answer"),
        ("crew", "Second answer.", "Answer"),
    ], SEEN


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
