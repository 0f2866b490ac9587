"""CrewAI's docs (kickoff-for-each.mdx): the same crew over several inputs."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/learn/kickoff-for-each.mdx"
RULES = [("contains", ["Describe lions."], "Lions roar."), ("contains", ["Describe frogs."], "Frogs croak.")]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Naturalist", goal="Describe {animal}", backstory="Observant.", llm=llm)
    task = Task(description="Describe {animal}.", expected_output="One line.", agent=writer)
    crew = Crew(agents=[writer], tasks=[task])
    results = crew.kickoff_for_each(inputs=[{"animal": "lions"}, {"animal": "frogs"}])
    assert [r.raw for r in results] == ["Lions roar.", "Frogs croak."], [r.raw for r in results]
    assert crew.usage_metrics is not None and crew.usage_metrics.total_tokens > 0


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
