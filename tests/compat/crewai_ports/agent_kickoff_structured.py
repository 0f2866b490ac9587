"""CrewAI's docs (agents.mdx, "Structured Output"): Agent.kickoff(response_format=Model) parses the answer."""

from pydantic import BaseModel

from chatagent.crewai import LLM, Agent

SOURCE = "docs/en/concepts/agents.mdx"
MODEL = [{"say": '{"city": "Paris", "population_millions": 2.1}'}]


class City(BaseModel):
    city: str
    population_millions: float


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    agent = Agent(role="Geographer", goal="Answer questions about places", backstory="A scholar.", llm=llm)
    out = agent.kickoff("Tell me about the capital of France.", response_format=City)
    assert isinstance(out.pydantic, City), out
    assert out.pydantic.city == "Paris" and out.pydantic.population_millions == 2.1


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
