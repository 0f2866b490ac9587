"""CrewAI's docs (memory.mdx, "Quick Start"): Memory.remember with explicit scope and categories, recall by meaning."""

from chatagent.crewai import LLM
from chatagent.crewai.memory import Memory

SOURCE = "docs/en/concepts/memory.mdx"


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    embedder = {
        "provider": "openai",
        "config": {"model_name": "text-embedding-3-small", "api_key": "EMPTY", "api_base": server},
    }
    memory = Memory(llm=llm, embedder=embedder)
    memory.remember(
        "The client prefers weekly status reports.", scope="/client", categories=["preferences"], importance=0.8
    )
    memory.remember("The office cat is called Miso.", scope="/office", categories=["trivia"], importance=0.2)
    found = memory.recall("weekly status reports for the client", limit=2, depth="shallow")
    assert found, found
    assert found[0].record.content == "The client prefers weekly status reports.", [m.record.content for m in found]
    assert "preferences" in found[0].record.categories


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
