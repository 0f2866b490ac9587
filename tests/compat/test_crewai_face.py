"""chatagent.crewai's items that the ported programs do not reach, through the documented API on a loopback model:
step callbacks, the output log, planning, memory per principal and its failures, a Mem0-shaped provider, flow
and memory events, LLMGuardrail, the agent's settings, and bad input refused."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import BaseModel

from chatagent import ScriptedLLM, Session, tool_call
from chatagent.crewai import LLM, Agent, Crew, LLMGuardrail, Task
from chatagent.crewai.events import (
    LLMStreamChunkEvent,
    MemoryQueryCompletedEvent,
    MethodExecutionFinishedEvent,
    MethodExecutionStartedEvent,
    crewai_event_bus,
)
from chatagent.crewai.flow.flow import Flow, listen, start
from chatagent.crewai.memory import Memory
from chatagent.crewai.tools import tool
from chatagent.run.context import CURRENT, RunContext


@pytest.fixture(autouse=True)
def _storage(tmp_path, monkeypatch):
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "storage"))
    monkeypatch.chdir(tmp_path)


@tool("Price Lookup")
def price(item: str) -> str:
    """The price of an item."""
    return f"{item}: 3 euros"


def test_step_callbacks_of_the_crew_and_the_agent_hear_every_reply_and_tool_result():
    crew_steps, agent_steps = [], []
    model = ScriptedLLM([tool_call("price_lookup", {"item": "tea"}), "Tea is 3 euros."])
    clerk = Agent(role="Clerk", goal="Prices", backstory="Shop.", llm=model, tools=[price],
                  step_callback=agent_steps.append)  # fmt: skip
    task = Task(description="How much is tea?", expected_output="The price.", agent=clerk)
    Crew(agents=[clerk], tasks=[task], step_callback=crew_steps.append).kickoff()
    assert [(s.tool, s.result) for s in crew_steps if s.tool] == [("price_lookup", "tea: 3 euros")]
    assert crew_steps[-1].text == "Tea is 3 euros." and crew_steps[-1].agent == "Clerk"
    assert [s.text or s.tool for s in agent_steps] == [s.text or s.tool for s in crew_steps]


def test_output_log_file_keeps_each_task_as_json(tmp_path):
    writer = Agent(role="Writer", goal="Write", backstory="Brief.", llm=ScriptedLLM(["One.", "Two."]))
    tasks = [Task(description=f"Line {i}.", expected_output="A line.", agent=writer) for i in (1, 2)]
    Crew(agents=[writer], tasks=tasks, output_log_file="crew_log.json").kickoff()
    logged = json.loads((tmp_path / "crew_log.json").read_text())
    assert [(e["task"], e["output"]) for e in logged] == [("Line 1.", "One."), ("Line 2.", "Two.")]


def test_planning_gives_each_task_its_plan(protocol_server):
    plans = {"list_of_plans_per_task": [{"task_number": 1, "task": "Describe tea", "plan": "Step 1: name three teas."}]}
    protocol_server.rules.append({"contains": ["Based on these tasks summary"], "say": json.dumps(plans)})
    protocol_server.rules.append(
        {"contains": ["Describe tea.", "Step 1: name three teas."], "say": "Green, black, oolong."}
    )
    llm = LLM(model="openai/test-model", base_url=protocol_server.base_url, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Describe", backstory="Knows tea.", llm=llm)
    task = Task(description="Describe tea.", expected_output="Three teas.", agent=writer)
    result = Crew(agents=[writer], tasks=[task], planning=True, planning_llm=llm).kickoff()
    assert result.raw == "Green, black, oolong."
    assert len(protocol_server.chat_requests) == 2  # the planner, then the task with its plan


def _memory_crew(memory, answers):
    clerk = Agent(role="Clerk", goal="Answer", backstory="Helpful.", llm=ScriptedLLM(answers))
    task = Task(description="Note what {person} likes: {thing}.", expected_output="A line.", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], memory=memory)


def test_a_crews_memory_is_per_principal_and_taken_from_the_run(tmp_path):
    memory = Memory(storage=str(tmp_path / "memory.db"))
    alice = Session(store=str(tmp_path / "sessions.db"), user="alice")
    _memory_crew(memory, ["Noted: jasmine tea."]).kickoff({"person": "Alice", "thing": "jasmine tea"}, session=alice)
    assert any("Noted: jasmine tea." in m.record.content for m in _recall_as(memory, "alice", "jasmine tea", tmp_path))
    assert _recall_as(memory, "bob", "jasmine tea", tmp_path) == []  # another principal's run sees none of them
    assert memory.recall("jasmine tea") == []  # outside a run: the local user's memories


def _recall_as(memory, user, query, tmp_path):
    """`memory.recall` inside a run of `user`'s (a session of theirs), as a crew's task calls it."""
    context = RunContext()
    context.session = Session(user=user, store=str(tmp_path / "sessions.db"))
    token = CURRENT.set(context)
    try:
        return memory.recall(query, limit=5)
    finally:
        CURRENT.reset(token)


class _BrokenStore:
    def add(self, messages, user_id=None, metadata=None):
        raise ConnectionError("the memory service is down")

    def search(self, query, user_id=None, limit=5):
        raise ConnectionError("the memory service is down")


def test_a_memory_that_fails_degrades_to_answering_without_it(caplog):
    caplog.set_level(logging.WARNING, logger="chatagent.crewai.memory")
    result = _memory_crew(Memory(storage=_BrokenStore()), ["Noted anyway."]).kickoff({"person": "A", "thing": "tea"})
    assert result.raw == "Noted anyway."
    assert "could not be read" in caplog.text and "could not keep" in caplog.text
    assert "memory service is down" not in caplog.text  # the error's text (it may hold anything) is not logged


class _Mem0Shaped:
    def __init__(self):
        self.added, self.searched = [], []

    def add(self, messages, user_id=None, metadata=None):
        self.added.append((messages[0]["content"], user_id))

    def search(self, query, user_id=None, limit=5):
        self.searched.append((query, user_id))
        return {"results": [{"id": "m1", "memory": "Alice likes jasmine tea.", "score": 0.9}]}


def test_a_mem0_shaped_provider_keeps_the_memories_of_the_runs_principal(protocol_server, tmp_path):
    provider = _Mem0Shaped()
    protocol_server.rules.append({"contains": ["Alice likes jasmine tea.", 'source="memory"'], "say": "Jasmine tea."})
    llm = LLM(model="openai/test-model", base_url=protocol_server.base_url, api_key="EMPTY")
    clerk = Agent(role="Clerk", goal="Answer", backstory="Helpful.", llm=llm)
    task = Task(description="What does Alice like?", expected_output="A drink.", agent=clerk)
    session = Session(store=str(tmp_path / "s.db"), user="alice")
    out = Crew(agents=[clerk], tasks=[task], memory=Memory(storage=provider)).kickoff(session=session)
    assert out.raw == "Jasmine tea."
    assert provider.searched[0][1] == "alice" and provider.added[0][1] == "alice"


def test_flow_and_memory_events_reach_the_bus(tmp_path):
    heard = []

    class Two(Flow):
        @start()
        def one(self):
            return 1

        @listen(one)
        def two(self, n):
            return n + 1

    with crewai_event_bus.scoped_handlers():
        crewai_event_bus.on(MethodExecutionStartedEvent)(lambda s, e: heard.append(("start", e.method_name)))
        crewai_event_bus.on(MethodExecutionFinishedEvent)(lambda s, e: heard.append(("end", e.method_name, e.result)))
        crewai_event_bus.on(MemoryQueryCompletedEvent)(lambda s, e: heard.append(("recall", len(e.results))))
        assert Two().kickoff() == 2
        Memory(storage=str(tmp_path / "m.db")).recall("anything")
    assert heard == [("start", "one"), ("end", "one", 1), ("start", "two"), ("end", "two", 2), ("recall", 0)]
    Two().kickoff()
    assert len(heard) == 5  # the handlers went with the block


def test_llm_guardrail_judges_by_its_own_model(protocol_server):
    protocol_server.rules.append({"contains": ["Check a task's answer", "no numbers"], "say": '{"valid": true}'})
    judge = LLM(model="openai/judge", base_url=protocol_server.base_url, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Write", backstory="Brief.", llm=ScriptedLLM(["Tea is green."]))
    task = Task(description="About tea.", expected_output="A line.", agent=writer,
                guardrail=LLMGuardrail(description="The answer has no numbers.", llm=judge))  # fmt: skip
    assert Crew(agents=[writer], tasks=[task]).kickoff().raw == "Tea is green."
    assert [r.json["model"] for r in protocol_server.chat_requests] == ["judge"]


def test_agent_settings_map_onto_chatagents_and_bad_input_is_refused():
    agent = Agent(role="R", goal="G", backstory="B", llm=ScriptedLLM(["x"]), max_iter=4, max_rpm=30,
                  inject_date=True, date_format="%Y")  # fmt: skip
    assert agent.max_llm_calls == 4 and agent.extra_generate_cfg["max_rpm"] == 30
    assert "Current Date: 20" in agent.system_message
    with pytest.raises(TypeError, match="colour"):
        Agent(role="R", goal="G", backstory="B", colour="red")
    with pytest.raises(ValueError, match="role"):
        Agent(role=" ", goal="G", backstory="B")
    with pytest.raises(TypeError, match="output_pydantic"):
        Task(description="d", expected_output="e", output_pydantic=dict)

    class Model(BaseModel):
        x: int

    with pytest.raises(ValueError, match="not both"):
        Task(description="d", expected_output="e", output_pydantic=Model, output_json=Model)
    with pytest.raises(ValueError, match="hierarchical crew needs"):
        Crew(agents=[agent], tasks=[Task(description="d", expected_output="e")], process="hierarchical")


def test_human_input_asks_in_the_terminal_and_sends_the_feedback_back(monkeypatch):
    said = iter(["Shorter, please.", ""])
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt="": asked.append(prompt) or next(said))
    model = ScriptedLLM(["Tea is a drink made from leaves, enjoyed around the world.", "Tea: leaves in water."])
    writer = Agent(role="Writer", goal="Describe", backstory="Brief.", llm=model)
    task = Task(description="Describe tea.", expected_output="A line.", agent=writer, human_input=True)
    result = Crew(agents=[writer], tasks=[task]).kickoff()
    assert result.raw == "Tea: leaves in water."
    assert len(asked) == 2 and "enjoyed around the world" in asked[0] and "leaves in water" in asked[1]
    assert result.token_usage.successful_requests == 2


def test_crew_test_scores_each_task_with_the_given_llm(protocol_server, tmp_path, capsys):
    protocol_server.rules.append({"contains": ["evaluate the performance of the agent", "rivers Researcher"],
                                  "say": '{"quality": 8}'})  # fmt: skip
    judge = LLM(model="openai/judge", base_url=protocol_server.base_url, api_key="EMPTY")
    researcher = Agent(role="{topic} Researcher", goal="Find facts", backstory="Careful.",
                       llm=ScriptedLLM(["Rivers flow.", "Rivers flow."]))  # fmt: skip
    task = Task(description="Research {topic}.", expected_output="One fact.", agent=researcher)
    report = Crew(agents=[researcher], tasks=[task]).test(2, eval_llm=judge, inputs={"topic": "rivers"},
                                                          store=str(tmp_path / "traces"))  # fmt: skip
    table = capsys.readouterr().out
    assert "Task 1" in table and "8.0" in table
    assert len(protocol_server.chat_requests) == 2 and report is not None


def test_the_answer_streams_as_llm_stream_chunk_events(protocol_server):
    protocol_server.script({"say": "Rivers carry water to the sea."})
    llm = LLM(model="openai/test-model", base_url=protocol_server.base_url, api_key="EMPTY")
    writer = Agent(role="Writer", goal="Write", backstory="Brief.", llm=llm)
    task = Task(description="About rivers.", expected_output="A line.", agent=writer)
    chunks = []
    with crewai_event_bus.scoped_handlers():
        crewai_event_bus.on(LLMStreamChunkEvent)(lambda source, event: chunks.append((event.agent_role, event.chunk)))
        result = Crew(agents=[writer], tasks=[task]).kickoff()
    assert "".join(c for _, c in chunks) == result.raw == "Rivers carry water to the sea."
    assert len(chunks) > 1 and {a for a, _ in chunks} == {"Writer"}


def test_entity_memory_gives_a_task_the_entities_it_names(protocol_server, tmp_path):
    from chatagent.crewai.memory.entity.entity_memory import EntityMemory, EntityMemoryItem

    entities = EntityMemory(storage=str(tmp_path / "memory.db"))
    entities.save([EntityMemoryItem(name="Acme", type="company", description="Our client since 2021.",
                                    relationships="buys from Globex"),
                   EntityMemoryItem(name="Miso", type="cat", description="The office cat.")])  # fmt: skip
    assert entities.search("Acme contract")[0]["metadata"]["name"] == "Acme"
    protocol_server.rules.append({"contains": ['source="memory"', "Acme (company): Our client since 2021."],
                                  "say": "Acme has been our client since 2021."})  # fmt: skip
    llm = LLM(model="openai/test-model", base_url=protocol_server.base_url, api_key="EMPTY")
    clerk = Agent(role="Clerk", goal="Answer", backstory="Knows the clients.", llm=llm)
    task = Task(description="How long has Acme been a client?", expected_output="A line.", agent=clerk)
    crew = Crew(agents=[clerk], tasks=[task], entity_memory=entities)
    assert crew.kickoff().raw == "Acme has been our client since 2021."
    crew.reset_memories("entity")
    assert entities.search("Acme") == []
    with pytest.raises(ValueError, match="type"):
        EntityMemoryItem(name="X", type=" ", description="d")
