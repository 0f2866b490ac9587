"""CrewAI's docs (hierarchical-process.mdx): a manager on manager_llm delegates the task to a coworker."""

from chatagent.crewai import LLM, Agent, Crew, Process, Task

SOURCE = "docs/en/learn/hierarchical-process.mdx"
MODEL = [
    {
        "call": [
            [
                "delegate_work_to_coworker",
                {"task": "Write a haiku about rain.", "context": "Keep it calm.", "coworker": "Poet"},
            ]
        ]
    },
    {"say": "Soft rain on the roof / the garden drinks in silence / evening settles down"},
    {"say": "Soft rain on the roof / the garden drinks in silence / evening settles down"},
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    poet = Agent(role="Poet", goal="Write poems", backstory="Loves haiku.", llm=llm)
    critic = Agent(role="Critic", goal="Judge poems", backstory="Strict.", llm=llm)
    task = Task(description="Produce a haiku about rain.", expected_output="A haiku.")
    crew = Crew(agents=[poet, critic], tasks=[task], process=Process.hierarchical, manager_llm=llm)
    result = crew.kickoff()
    assert result.raw.startswith("Soft rain on the roof"), result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
