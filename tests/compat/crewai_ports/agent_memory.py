"""CrewAI's docs (memory.mdx, "Memory with Agents"): an agent with a memory of its own recalls in one kickoff what
it learned in an earlier one, and in a crew's task."""

from chatagent.crewai import LLM, Agent, Crew, Process, Task
from chatagent.crewai.memory import Memory

SOURCE = "docs/en/concepts/memory.mdx"
RULES = [
    ("contains", ["Lisbon", "Suggest a day trip"], "Sintra, a short train ride from Lisbon."),
    ("contains", ["Lisbon", "Where do I live?"], "You live in Lisbon."),
    ("contains", ["My name is Ada and I live in Lisbon."], "Nice to meet you, Ada."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    embedder = {"provider": "openai", "config": {"model_name": "text-embedding-3-small", "api_key": "EMPTY",
                                                 "api_base": server}}  # fmt: skip
    memory = Memory(llm=llm, embedder=embedder)
    assistant = Agent(role="Personal Assistant", goal="Help the user with what they ask",
                      backstory="You remember what the user tells you.", llm=llm, memory=memory)  # fmt: skip
    assert assistant.kickoff("My name is Ada and I live in Lisbon.").raw == "Nice to meet you, Ada."
    assert assistant.kickoff("Where do I live?").raw == "You live in Lisbon."
    trip = Task(description="Suggest a day trip for the user.", expected_output="One place", agent=assistant)
    out = Crew(agents=[assistant], tasks=[trip], process=Process.sequential).kickoff()
    assert out.raw == "Sintra, a short train ride from Lisbon.", out.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
