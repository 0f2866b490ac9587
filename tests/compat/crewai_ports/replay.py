"""CrewAI's docs (replay-tasks-from-latest-crew-kickoff.mdx): Crew.replay(task_id) runs again from that task."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/learn/replay-tasks-from-latest-crew-kickoff.mdx"
MODEL = [{"say": "Draft one."}, {"say": "Edited one."}, {"say": "Edited again."}]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Draft", backstory="Quick.", llm=llm)
    editor = Agent(role="Editor", goal="Edit", backstory="Careful.", llm=llm)
    draft = Task(description="Draft a line about {topic}.", expected_output="A line.", agent=writer)
    edit = Task(description="Edit the draft.", expected_output="The edited line.", agent=editor)
    crew = Crew(agents=[writer, editor], tasks=[draft, edit])
    assert crew.kickoff(inputs={"topic": "tea"}).raw == "Edited one."
    again = crew.replay(task_id=str(edit.id))
    assert again.raw == "Edited again.", again.raw
    assert again.tasks_output[0].raw == "Draft one.", [t.raw for t in again.tasks_output]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
