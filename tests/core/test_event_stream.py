"""run(..., events=True): one typed, serializable event stream in order (the run's callback events and its streamed
fragments), with interrupts, handoffs and nested runs, held by output checks as text is."""

from __future__ import annotations

import asyncio
import gc

import orjson
import pytest

from chatagent import BasicAgent, FnCallAgent, OutputGuardrail, ScriptedLLM, ask_user, handoff, tool, tool_call

USER = [{"role": "user", "content": "hi"}]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@tool
def book(city: str) -> str:
    """Book a trip."""
    return ask_user(f"Which date for {city}?")


def shape(ev) -> tuple:
    """What an event says, without its times and ids."""
    d = ev.to_dict()
    keep = {k: v for k, v in d.items() if k in ("tool", "text", "name", "arguments", "result", "error", "to", "index")}
    return (ev.type, keep) if keep else (ev.type,)


def test_a_tool_using_run_event_by_event():
    llm = ScriptedLLM([[tool_call("weather", {"city": "Oslo"})], "It is sunny."], chunk_size=6)
    bot = FnCallAgent(llm=llm, function_list=[weather], name="bot")
    evs = list(bot.run(USER, events=True))
    assert [shape(e) for e in evs] == [
        ("run_start",),
        ("model_start",),
        ("tool_call_delta", {"index": 0, "name": "weather", "arguments": '{"city": "Oslo"}'}),
        ("model_end", {"error": None}),
        ("tool_start", {"tool": "weather", "arguments": '{"city": "Oslo"}'}),
        ("tool_end", {"tool": "weather", "result": "sunny", "error": None}),
        ("model_start",),
        ("text_delta", {"index": 2, "text": "It is "}),
        ("text_delta", {"index": 2, "text": "sunny."}),
        ("model_end", {"error": None}),
        ("run_end", {"error": None}),
    ]
    assert evs[3].data["usage"]["prompt_tokens"] > 0 and evs[-1].data["usage"]["completion_tokens"] > 0
    assert {e.run_id for e in evs} == {evs[0].run_id} and evs[0].parent_id is None  # one run, at the top
    assert all(e.agent == "bot" for e in evs)
    orjson.dumps([e.to_dict() for e in evs])  # serializable


def test_an_interrupt_is_an_event_and_arun_gives_the_same_stream():
    def script():
        return ScriptedLLM([[tool_call("book", {"city": "Rome"})]])

    evs = list(FnCallAgent(llm=script(), function_list=[book]).run(USER, events=True))
    assert [e.type for e in evs][-3:] == ["tool_end", "interrupt", "run_end"]
    assert evs[-3].data["error"] == "interrupted"
    (q,) = evs[-2].data["questions"]
    assert q["question"] == "Which date for Rome?"

    async def main():
        return [e async for e in FnCallAgent(llm=script(), function_list=[book]).arun(USER, events=True)]

    assert [shape(e) for e in asyncio.run(main())] == [shape(e) for e in evs]


def test_a_handoff_and_the_receivers_nested_run_have_their_parent():
    billing = FnCallAgent(llm=ScriptedLLM(["Refunded."]), name="billing", description="Refunds.")
    triage = FnCallAgent(llm=ScriptedLLM([tool_call("transfer_to_billing", {})]), name="triage",
                         handoffs=[handoff(billing)])  # fmt: skip
    evs = list(triage.run(USER, events=True))
    types = [e.type for e in evs]
    assert "handoff" in types and evs[types.index("handoff")].data["to"] == "billing"
    top = evs[0].run_id
    nested = [e for e in evs if e.agent == "billing" and e.type == "model_start"]
    assert nested and nested[0].parent_id is not None and nested[0].run_id != top
    assert "".join(e.data["text"] for e in evs if e.type == "text_delta") == "Refunded."


def test_an_output_check_holds_the_text_events_as_it_holds_text():
    def no_emails(text):
        return "an e-mail address" if "@" in text else None

    guard = OutputGuardrail(no_emails, message="[withheld]")
    blocked = BasicAgent(llm=ScriptedLLM(["Write to ceo@example.com."], chunk_size=4), plugins=[guard])
    texts = [e.data["text"] for e in blocked.run(USER, events=True) if e.type == "text_delta"]
    assert texts == ["[withheld]"] and not any("@" in t for t in texts)  # the blocked text never came out
    ok = BasicAgent(llm=ScriptedLLM(["Hello there."], chunk_size=4), plugins=[guard])
    evs = list(ok.run(USER, events=True))
    text_at = [i for i, e in enumerate(evs) if e.type == "text_delta"]
    model_end = [i for i, e in enumerate(evs) if e.type == "model_end"][-1]
    assert "".join(evs[i].data["text"] for i in text_at) == "Hello there."
    assert min(text_at) > model_end  # held until the check passed, after the model's stream ended


def test_run_nonstream_has_no_event_stream():
    with pytest.raises(TypeError, match="iterate run"):
        BasicAgent(llm=ScriptedLLM(["x"])).run_nonstream(USER, events=True)


def test_a_crews_run_with_a_tool_a_handoff_and_a_memory_recall_event_by_event(tmp_path):
    """Issue 39: a crew's stream, asserted event by event: the tasks as steps, a tool-using agent that hands off, an
    Assistant recalling and storing memories; each nested run names its agent and the run it is part of, and the
    streamed deltas are the crew's (the run being streamed), by message index."""
    from chatagent import Assistant, Crew, Task
    from chatagent.memories.longterm import LongTermMemory

    memory = LongTermMemory(user="alice", store=str(tmp_path / "memories.db"), embedder=None)
    memory.remember("Alice prefers trips by train.")
    forecaster = FnCallAgent(llm=ScriptedLLM(["Oslo: sunny."]), name="forecaster", description="Forecasts.")
    scout = FnCallAgent(llm=ScriptedLLM([[tool_call("weather", {"city": "Oslo"})], tool_call("transfer_to_forecaster", {})]),
                        name="scout", function_list=[weather], handoffs=[handoff(forecaster)])  # fmt: skip
    writer = Assistant(llm=ScriptedLLM(["By train."]), name="writer", memory=memory)
    crew = Crew(agents=[scout, writer], tasks=[
        Task("Check the weather in {city}.", agent=scout, expected_output="a forecast"),
        Task("Plan Alice's trip to {city}.", agent=writer, expected_output="a plan"),
    ])  # fmt: skip
    evs = list(crew.as_agent().run([{"role": "user", "content": '{"city": "Oslo"}'}], events=True))

    def seen(ev) -> tuple:
        d = ev.to_dict()
        keep = {k: v for k, v in d.items() if k in ("tool", "text", "name", "arguments", "result", "to", "op", "index")}
        if ev.type == "memory":
            keep.pop("text", None)  # (what was recalled: asserted below)
        return (ev.type, ev.agent, keep) if keep else (ev.type, ev.agent)

    delta = ("text_delta", "crew")
    assert [seen(e) for e in evs] == [
        ("run_start", "crew"),
        (*delta, {"index": 0, "text": "Task 1/2 (scout): Check the weather in Oslo."}),
        ("step_start", "crew", {"name": "Task 1"}),
        ("run_start", "scout"),
        ("model_start", "scout"),
        ("tool_call_delta", "crew", {"index": 1, "name": "weather", "arguments": '{"city": "Oslo"}'}),
        ("model_end", "scout"),
        ("tool_start", "scout", {"tool": "weather", "arguments": '{"city": "Oslo"}'}),
        ("tool_end", "scout", {"tool": "weather", "result": "sunny"}),
        ("model_start", "scout"),
        ("tool_call_delta", "crew", {"index": 3, "name": "transfer_to_forecaster", "arguments": "{}"}),
        ("model_end", "scout"),
        ("tool_start", "scout", {"tool": "transfer_to_forecaster", "arguments": "{}"}),
        ("tool_end", "scout", {"tool": "transfer_to_forecaster", "result": ""}),
        ("handoff", "scout", {"to": "forecaster"}),
        ("run_start", "forecaster"),
        ("model_start", "forecaster"),
        (*delta, {"index": 5, "text": "Oslo"}),
        (*delta, {"index": 5, "text": ": su"}),
        (*delta, {"index": 5, "text": "nny."}),
        ("model_end", "forecaster"),
        ("run_end", "forecaster"),
        ("run_end", "scout"),
        ("step_end", "crew", {"name": "Task 1"}),
        (*delta, {"index": 6, "text": "Task 2/2 (writer): Plan Alice's trip to Oslo."}),
        ("step_start", "crew", {"name": "Task 2"}),
        ("run_start", "writer"),
        ("memory", "writer", {"op": "recall"}),
        ("model_start", "writer"),
        (*delta, {"index": 7, "text": "By t"}),
        (*delta, {"index": 7, "text": "rain"}),
        (*delta, {"index": 7, "text": "."}),
        ("model_end", "writer"),
        ("memory", "writer", {"op": "store"}),
        ("run_end", "writer"),
        ("step_end", "crew", {"name": "Task 2"}),
        ("run_end", "crew"),
    ]
    recall = next(e for e in evs if e.type == "memory")
    assert "Alice prefers trips by train." in recall.data["text"] and recall.data["records"] is None  # as given
    assert [e for e in evs if e.type == "memory"][1].data["records"] == 1  # the task's question kept for alice
    assert any("Plan Alice's trip" in r.text for r in memory.list())
    runs = {e.agent: (e.run_id, e.parent_id) for e in evs if e.type == "run_start"}
    assert runs["crew"][1] is None and len({run for run, _ in runs.values()}) == 4  # four runs, the crew's on top
    assert runs["scout"][1] == runs["writer"][1] == runs["crew"][0] and runs["forecaster"][1] == runs["scout"][0]
    assert all(e.run_id == runs[e.agent][0] for e in evs if e.agent != "crew")  # each event in its own run
    assert all(e.data.get("error") is None for e in evs if e.type.endswith("_end"))
    orjson.dumps([e.to_dict() for e in evs])


def test_runs_one_after_another_never_share_a_run_id() -> None:
    """An event's run_id names its run: two runs of a process, the first one's context already freed, differ (the
    id was once the context's memory address, which CPython hands to the next context)."""
    ids = []
    for _ in range(20):
        bot = BasicAgent(llm=ScriptedLLM(["Hello."]), name="bot")
        ids.append({e.run_id for e in bot.run(USER, events=True)})
        del bot
        gc.collect()
    assert all(len(one) == 1 for one in ids)
    assert len({one.pop() for one in ids}) == 20
