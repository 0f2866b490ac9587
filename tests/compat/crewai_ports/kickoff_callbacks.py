"""CrewAI's docs (crews.mdx, before/after kickoff callbacks): inputs changed before, output changed after."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/crews.mdx"
RULES = [("contains", ["Summarise RIVERS."], "Rivers summarised.")]


def shout_topic(inputs):
    inputs["topic"] = inputs["topic"].upper()
    return inputs


def sign(output):
    output.raw = output.raw + " -- the crew"
    return output


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Summarise", backstory="Brief.", llm=llm)
    task = Task(description="Summarise {topic}.", expected_output="One line.", agent=writer)
    crew = Crew(agents=[writer], tasks=[task], before_kickoff_callbacks=[shout_topic], after_kickoff_callbacks=[sign])
    result = crew.kickoff(inputs={"topic": "rivers"})
    assert result.raw == "Rivers summarised. -- the crew", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
