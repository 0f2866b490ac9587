"""CrewAI's docs (tasks.mdx, "Using output_pydantic"): the task's answer as a model, on the crew's output too."""

from pydantic import BaseModel

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": '{"title": "Rivers", "points": ["They flow", "They erode"]}'}]


class Outline(BaseModel):
    title: str
    points: list[str]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Outline articles", backstory="Structured.", llm=llm)
    task = Task(
        description="Outline an article on rivers.",
        expected_output="A title and points.",
        agent=writer,
        output_pydantic=Outline,
    )
    result = Crew(agents=[writer], tasks=[task]).kickoff()
    assert isinstance(result.pydantic, Outline), result
    assert result.pydantic.points == ["They flow", "They erode"]
    assert result["title"] == "Rivers"
    assert result.tasks_output[0].pydantic.title == "Rivers"
    assert result.to_dict() == {"title": "Rivers", "points": ["They flow", "They erode"]}


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
