"""CrewAI's docs (agents.mdx, "Direct Agent Interaction"): an agent asked directly with Agent.kickoff()."""

from chatagent.crewai import LLM, Agent

SOURCE = "docs/en/concepts/agents.mdx"
MODEL = [{"say": "Paris is the capital of France."}]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    agent = Agent(
        role="Geographer",
        goal="Answer questions about places",
        backstory="A well-travelled scholar.",
        llm=llm,
        verbose=False,
    )
    out = agent.kickoff("What is the capital of France?")
    assert out.raw == "Paris is the capital of France.", out.raw
    assert str(out) == out.raw
    assert out.agent_role == "Geographer"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
