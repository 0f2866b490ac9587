"""CrewAI's docs (tools.mdx, "Utilizing the tool decorator"): a @tool named with spaces, called by the agent."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.tools import tool

SOURCE = "docs/en/concepts/tools.mdx"
# the name the model sees is the sanitized one (servers refuse names with spaces)
MODEL = [{"call": [["multiplication_tool", {"first_number": 6, "second_number": 7}]]}]
RULES = [("contains", ["42"], "The product is 42.")]
CALLS = []


@tool("Multiplication Tool")
def multiply(first_number: int, second_number: int) -> str:
    """Multiplies two numbers and gives the product."""
    CALLS.append((first_number, second_number))
    return str(first_number * second_number)


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    calc = Agent(role="Calculator", goal="Compute exactly", backstory="Never guesses.", tools=[multiply], llm=llm)
    task = Task(description="What is 6 times 7?", expected_output="The product.", agent=calc)
    result = Crew(agents=[calc], tasks=[task]).kickoff()
    assert CALLS == [(6, 7)], CALLS
    assert result.raw == "The product is 42.", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
