"""CrewAI's docs (collaboration.mdx): allow_delegation=True gives an agent the tools to ask its coworkers."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/collaboration.mdx"
MODEL = [
    {
        "call": [
            [
                "ask_question_to_coworker",
                {"question": "What year did the bridge open?", "context": "For a report.", "coworker": "Historian"},
            ]
        ]
    },
    {"say": "The bridge opened in 1932."},
    {"say": "Report: the bridge opened in 1932."},
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    lead = Agent(role="Lead Writer", goal="Write reports", backstory="Asks experts.", allow_delegation=True, llm=llm)
    historian = Agent(role="Historian", goal="Know dates", backstory="Remembers everything.", llm=llm)
    task = Task(description="Write a one-line report on the bridge.", expected_output="One line.", agent=lead)
    result = Crew(agents=[lead, historian], tasks=[task]).kickoff()
    assert result.raw == "Report: the bridge opened in 1932.", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
