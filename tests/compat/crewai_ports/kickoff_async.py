"""CrewAI's docs (kickoff-async.mdx): crews started on asyncio, two at once."""

import asyncio

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/learn/kickoff-async.mdx"
RULES = [
    ("contains", ["Average of 1, 2, 3."], "The average is 2."),
    ("contains", ["Average of 4, 6."], "The average is 5."),
]


def make_crew(llm, numbers):
    analyst = Agent(role="Analyst", goal="Compute averages", backstory="Numerate.", llm=llm)
    task = Task(description=f"Average of {numbers}.", expected_output="The average.", agent=analyst)
    return Crew(agents=[analyst], tasks=[task])


async def both(llm):
    return await asyncio.gather(
        make_crew(llm, "1, 2, 3").kickoff_async(inputs={}), make_crew(llm, "4, 6").kickoff_async(inputs={})
    )


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    first, second = asyncio.run(both(llm))
    assert first.raw == "The average is 2." and second.raw == "The average is 5.", (first.raw, second.raw)


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
