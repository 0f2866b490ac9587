"""CrewAI's docs (knowledge.mdx, "Quickstart"): a StringKnowledgeSource on an agent; its passage reaches the task."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource

SOURCE = "docs/en/concepts/knowledge.mdx"
RULES = [
    # CrewAI first asks the model to rewrite the task as a search query; chatagent searches with the task's text
    ("contains", ["rewrite the user query so that it is optimized for retrieval"], "Where does John live?"),
    # the answer is given only when the request holds the knowledge passage
    ("contains", ["What city does John live in?", "lives in San Francisco"], "John lives in San Francisco."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    embedder = {
        "provider": "openai",
        "config": {"model_name": "text-embedding-3-small", "api_key": "EMPTY", "api_base": server},
    }
    source = StringKnowledgeSource(content="John is 30 years old and lives in San Francisco. He works as a baker.")
    agent = Agent(
        role="About User",
        goal="You know everything about the user.",
        backstory="You are a master at understanding people and their preferences.",
        llm=llm,
        knowledge_sources=[source],
        embedder=embedder,
    )
    task = Task(
        description="Answer the following question about the user: What city does John live in?",
        expected_output="An answer to the question.",
        agent=agent,
    )
    result = Crew(agents=[agent], tasks=[task], embedder=embedder).kickoff()
    assert result.raw == "John lives in San Francisco.", result.raw


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
