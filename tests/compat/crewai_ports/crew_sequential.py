"""CrewAI's docs (Quickstart, crews.mdx): two agents, two tasks in sequence; the second gets the first's output."""

from chatagent.crewai import LLM, Agent, Crew, Process, Task

SOURCE = "docs/en/quickstart.mdx"
MODEL = [{"say": "Rivers carry water to the sea."}]
# the editor is answered only when its request holds the researcher's output (the context a sequential crew passes)
RULES = [
    (
        "contains",
        ["Rewrite the research in capitals", "Rivers carry water to the sea."],
        "RIVERS CARRY WATER TO THE SEA.",
    )
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    researcher = Agent(
        role="{topic} Researcher", goal="Find facts about {topic}", backstory="A careful researcher.", llm=llm
    )
    editor = Agent(role="Editor", goal="Shout the facts", backstory="An editor who writes in capitals.", llm=llm)
    research = Task(description="Research {topic}.", expected_output="One sentence.", agent=researcher)
    shout = Task(
        description="Rewrite the research in capitals.", expected_output="The sentence in capitals.", agent=editor
    )
    crew = Crew(agents=[researcher, editor], tasks=[research, shout], process=Process.sequential, verbose=False)
    result = crew.kickoff(inputs={"topic": "rivers"})
    assert result.raw == "RIVERS CARRY WATER TO THE SEA.", result.raw
    assert str(result) == result.raw
    assert [t.raw for t in result.tasks_output] == ["Rivers carry water to the sea.", "RIVERS CARRY WATER TO THE SEA."]
    assert result.tasks_output[0].agent == "rivers Researcher", result.tasks_output[0].agent
    assert research.output is not None and research.output.raw == "Rivers carry water to the sea."
    assert result.token_usage.total_tokens > 0
    assert result.token_usage.successful_requests >= 2, result.token_usage  # CrewAI counts a request per agent and crew


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
