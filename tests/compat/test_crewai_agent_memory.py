"""`Agent(memory=...)` on chatagent.crewai: what an agent learns in one kickoff is recalled in the next, for the
principal the run acts for (`chatagent.run.trust`) only, and reaches the model as untrusted memory text."""

from __future__ import annotations

import logging

from chatagent.crewai import LLM, Agent
from chatagent.crewai.memory import Memory
from chatagent.run.trust import Trust, acting_as
from tests.support.protocol_server import prompt_text

ALICE = Trust(principal="client:alice", shared=True)
BOB = Trust(principal="client:bob", shared=True)


def _agent(server, tmp_path) -> Agent:
    llm = LLM(model="openai/test-model", base_url=server.base_url, api_key="EMPTY")
    return Agent(role="Assistant", goal="Help", backstory="Remembers.", llm=llm,
                 memory=Memory(storage=str(tmp_path / "memory.db")))  # fmt: skip


def _last_prompt(server) -> str:
    return prompt_text(server.requests[-1].json)


def test_an_agents_memory_is_recalled_for_its_principal_only(protocol_server, tmp_path):
    protocol_server.rules.append({"contains": ["Where do I live?"], "say": "I do not know yet."})
    protocol_server.rules.append({"contains": ["I live in Lisbon."], "say": "Noted."})
    agent = _agent(protocol_server, tmp_path)
    with acting_as(ALICE):
        assert agent.kickoff("I live in Lisbon.").raw == "Noted."
    with acting_as(BOB):
        agent.kickoff("Where do I live?")
        assert "Lisbon" not in _last_prompt(protocol_server), "bob's run recalled alice's memory"
    with acting_as(ALICE):
        agent.kickoff("Where do I live?")
    prompt = _last_prompt(protocol_server)
    assert '<untrusted-data source="memory">' in prompt and "I live in Lisbon." in prompt, prompt
    assert prompt.index("I live in Lisbon.") > prompt.index('<untrusted-data source="memory">')
    again = _agent(protocol_server, tmp_path)  # a new agent on the same store: what alice's agent learned is kept
    with acting_as(ALICE):
        again.kickoff("Where do I live?")
    assert "I live in Lisbon." in _last_prompt(protocol_server)


def test_a_shared_surface_without_a_principal_reaches_no_memory_and_answers(protocol_server, tmp_path, caplog):
    protocol_server.rules.append({"contains": ["Where do I live?"], "say": "I do not know yet."})
    protocol_server.rules.append({"contains": ["I live in Lisbon."], "say": "Noted."})
    agent = _agent(protocol_server, tmp_path)
    with acting_as(ALICE):
        agent.kickoff("I live in Lisbon.")
    with acting_as(Trust(shared=True)), caplog.at_level(logging.WARNING, "chatagent.crewai"):
        assert agent.kickoff("Where do I live?").raw == "I do not know yet."
    assert "Lisbon" not in _last_prompt(protocol_server)
    assert "memory" in caplog.text
