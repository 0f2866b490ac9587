"""CrewAI's docs (tasks.mdx, "Asynchronous Execution"): two async tasks, joined by the next synchronous one."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
# async tasks may ask the model in either order: every answer is a rule on what the request holds (first match)
RULES = [
    (
        "contains",
        ["Write the digest.", "models got smaller", "a new probe launched"],
        "Digest: small models, new probe.",
    ),
    ("contains", ["Research AI news."], "AI news: models got smaller."),
    ("contains", ["Research space news."], "Space news: a new probe launched."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    # one agent per async task: CrewAI 1.15 refuses to run one agent's executor for two tasks at once
    researcher = Agent(role="Researcher", goal="Research news", backstory="Fast.", llm=llm)
    scout = Agent(role="Space Scout", goal="Research space news", backstory="Watches the sky.", llm=llm)
    ai = Task(description="Research AI news.", expected_output="One line.", agent=researcher, async_execution=True)
    space = Task(description="Research space news.", expected_output="One line.", agent=scout, async_execution=True)
    digest = Task(description="Write the digest.", expected_output="One line.", agent=researcher, context=[ai, space])
    result = Crew(agents=[researcher, scout], tasks=[ai, space, digest]).kickoff()
    assert result.raw == "Digest: small models, new probe.", result.raw
    assert sorted(t.raw for t in result.tasks_output[:2]) == [
        "AI news: models got smaller.",
        "Space news: a new probe launched.",
    ]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
