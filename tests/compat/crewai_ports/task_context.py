"""CrewAI's docs (tasks.mdx, "Referring to Other Tasks"): a task's context names the tasks whose outputs it gets."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
RULES = [
    # the summary is answered only when it holds the whale facts (its context); rules match in order
    ("contains", ["Summarise the whale facts.", "Whales are mammals."], "Summary: whales are mammals."),
    ("contains", ["List facts about owls."], "Owls hunt at night."),
    ("contains", ["List facts about whales."], "Whales are mammals."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    analyst = Agent(role="Analyst", goal="Know animals", backstory="A zoologist.", llm=llm)
    whales = Task(description="List facts about whales.", expected_output="One fact.", agent=analyst)
    owls = Task(description="List facts about owls.", expected_output="One fact.", agent=analyst)
    summary = Task(
        description="Summarise the whale facts.", expected_output="One line.", agent=analyst, context=[whales]
    )
    result = Crew(agents=[analyst], tasks=[whales, owls, summary]).kickoff()
    assert result.raw == "Summary: whales are mammals.", result.raw
    assert [t.raw for t in result.tasks_output][:2] == ["Whales are mammals.", "Owls hunt at night."]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
