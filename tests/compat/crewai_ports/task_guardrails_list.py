"""CrewAI's docs (tasks.mdx, "Multiple Guardrails"): guardrails=[...] check the answer one after another."""

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": "rivers flow"}, {"say": "Rivers flow to the sea"}]


def capitalised(result):
    return (True, result.raw) if result.raw[:1].isupper() else (False, "Start with a capital letter.")


def long_enough(result):
    return (True, result.raw + ".") if len(result.raw.split()) >= 3 else (False, "Use at least three words.")


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Write", backstory="Careful.", llm=llm)
    task = Task(
        description="Say where rivers go.",
        expected_output="A sentence.",
        agent=writer,
        guardrails=[capitalised, long_enough],
        guardrail_max_retries=3,
    )
    result = Crew(agents=[writer], tasks=[task]).kickoff()
    assert result.raw == "Rivers flow to the sea.", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
