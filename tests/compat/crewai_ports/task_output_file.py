"""CrewAI's docs (tasks.mdx, output_file with create_directory): the answer written to a file in a new folder."""

import os

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": "# Report\n\nAll rivers flow."}]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Reporter", goal="Write reports", backstory="Concise.", llm=llm)
    task = Task(
        description="Write a report on {topic}.",
        expected_output="A short Markdown report.",
        agent=writer,
        output_file="reports/{topic}.md",
        create_directory=True,
        markdown=True,
    )
    Crew(agents=[writer], tasks=[task]).kickoff(inputs={"topic": "rivers"})
    path = os.path.join(workdir, "reports", "rivers.md")
    assert os.path.isfile(path), os.listdir(workdir)
    with open(path, encoding="utf-8") as f:
        assert "All rivers flow." in f.read()


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
