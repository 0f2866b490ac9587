"""CrewAI's docs (knowledge.mdx, "Text File Knowledge Source"): files under ./knowledge, on the crew."""

import os

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.knowledge.source.text_file_knowledge_source import TextFileKnowledgeSource

SOURCE = "docs/en/concepts/knowledge.mdx"
RULES = [
    ("contains", ["rewrite the user query so that it is optimized for retrieval"], "refund policy days"),
    ("contains", ["How many days do customers have for a refund?", "within 45 days"], "Customers have 45 days."),
]


def main(server: str, workdir: str) -> None:
    os.makedirs(os.path.join(workdir, "knowledge"), exist_ok=True)
    with open(os.path.join(workdir, "knowledge", "policy.txt"), "w", encoding="utf-8") as f:
        f.write("Refunds. Customers may return any item within 45 days of delivery for a full refund.\n")
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    embedder = {
        "provider": "openai",
        "config": {"model_name": "text-embedding-3-small", "api_key": "EMPTY", "api_base": server},
    }
    policies = TextFileKnowledgeSource(file_paths=["policy.txt"])
    agent = Agent(role="Support", goal="Answer customers", backstory="Knows the policies.", llm=llm)
    task = Task(
        description="How many days do customers have for a refund?", expected_output="The number of days.", agent=agent
    )
    crew = Crew(agents=[agent], tasks=[task], knowledge_sources=[policies], embedder=embedder)
    assert crew.kickoff().raw == "Customers have 45 days."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
