"""Recorded traces: what a run's trace holds (model calls with the request they got, tool calls, nested runs, a crew's
tasks, a flow's methods, handoffs, retrieval), whose it is, and that nothing is recorded unless asked for."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from chatagent import (
    BasicAgent,
    Crew,
    Flow,
    FnCallAgent,
    ModelServiceError,
    ScriptedLLM,
    Session,
    Task,
    listen,
    tool,
    tool_call,
)
from chatagent import start as flow_start
from chatagent.run import traces
from chatagent.run.events import Callbacks
from chatagent.sessions.traces import TraceStore
from tests.support import processes

USER = [{"role": "user", "content": "Weather in Oslo?"}]


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def tool_bot(url: str, **kwargs: Any) -> FnCallAgent:
    llm = ScriptedLLM([tool_call("weather", {"city": "Oslo"}), "Sunny in Oslo."])
    return FnCallAgent(llm=llm, function_list=[weather], name="forecaster", traces=url, **kwargs)


def only_trace(url: str, owner: str = "local") -> dict[str, Any]:
    assert traces.flush_traces(30)
    found = TraceStore(url).list(owner)
    assert len(found) == 1, found
    trace = TraceStore(url).get(owner, found[0].id)
    assert trace is not None
    return trace


def kinds(trace: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(s["kind"], s["name"], s["parent"]) for s in trace["steps"]]


def test_a_tool_round_trip_is_a_run_with_its_model_calls_and_tool_call(store_url: str) -> None:
    tool_bot(store_url).run_nonstream(USER)
    trace = only_trace(store_url)
    assert kinds(trace) == [("run", "forecaster", None), ("model", "scripted", 1), ("tool", "weather", 1),
                            ("model", "scripted", 1)]  # fmt: skip
    assert trace["status"] == "ok" and trace["title"] == "Weather in Oslo?" and trace["owner"] == "local"
    call = trace["steps"][2]
    assert call["arguments"] == '{"city": "Oslo"}' and call["result"] == "sunny in Oslo" and "error" not in call
    second = trace["steps"][3]
    sent = [trace["messages"][i] for i in second["input"]]  # the exact messages the model got, tool result marked
    assert [m["role"] for m in sent] == ["user", "assistant", "function"]
    assert "sunny in Oslo" in sent[2]["content"] and "untrusted" in sent[2]["content"]
    assert trace["functions"][second["functions"]][0]["name"] == "weather"
    assert trace["messages"][second["output"][0]]["content"] == "Sunny in Oslo."
    assert len(trace["messages"]) == 4  # each message once, though the second call got the first three again
    usage = trace["usage"]
    assert usage["calls"] == 2 and usage["input_tokens"] > 0
    assert usage["input_tokens"] == sum(s["usage"]["input_tokens"] for s in trace["steps"] if s["kind"] == "model")
    listed = TraceStore(store_url).list("local")[0]
    assert (listed.name, listed.status, listed.steps, listed.input_tokens) == ("forecaster", "ok", 4,
                                                                               usage["input_tokens"])  # fmt: skip


def test_a_trace_is_its_session_users_and_no_one_elses(store_url: str, tmp_path) -> None:
    tool_bot(store_url).run_nonstream(USER, session=Session("s1", str(tmp_path / "s.db"), user="alice"))
    assert traces.flush_traces(30)
    store = TraceStore(store_url)
    assert [t.owner for t in store.list("alice")] == ["alice"]
    trace_id = store.list("alice")[0].id
    assert store.list("bob") == [] and store.list("local") == []
    assert store.get("bob", trace_id) is None and not store.delete("bob", trace_id)
    assert store.get("alice", trace_id) is not None


def test_the_owner_cannot_be_taken_over_by_writing_the_same_trace_id(sqlite_url: str) -> None:
    store = TraceStore(sqlite_url)
    body = {"id": "t1", "owner": "alice", "name": "a", "started": 1.0, "steps": [], "title": "alice's"}
    store.save(body)
    store.save({**body, "owner": "mallory", "title": "mallory's"})
    assert store.get("alice", "t1")["title"] == "alice's" and store.get("mallory", "t1") is None


def test_nothing_is_recorded_without_asking_and_no_event_is_built(sqlite_url: str, monkeypatch) -> None:
    from chatagent.run import events

    built: list[str] = []
    make = events.make_event
    monkeypatch.setattr(events, "make_event", lambda *a, **k: built.append(a[0]) or make(*a, **k))
    bot = FnCallAgent(llm=ScriptedLLM([tool_call("weather", {"city": "Oslo"}), "Sunny."]), function_list=[weather])
    bot.run_nonstream(USER)
    assert bot.callbacks == () and built == []
    assert TraceStore(sqlite_url).list("local") == []


def test_record_traces_records_every_run_and_stops(sqlite_url: str) -> None:
    traces.record_traces(sqlite_url)
    BasicAgent(llm=ScriptedLLM(["one"]), name="a").run_nonstream(USER)
    BasicAgent(llm=ScriptedLLM(["two"]), name="b").run_nonstream(USER)
    traces.stop_recording()
    BasicAgent(llm=ScriptedLLM(["three"]), name="c").run_nonstream(USER)
    assert traces.flush_traces(30)
    assert sorted(t.name for t in TraceStore(sqlite_url).list("local")) == ["a", "b"]


def test_an_agent_that_records_under_a_global_recorder_makes_one_trace(sqlite_url: str) -> None:
    traces.record_traces(sqlite_url)
    tool_bot(sqlite_url).run_nonstream(USER)
    assert len(only_trace(sqlite_url)["steps"]) == 4


def test_the_environment_variable_records_every_run_of_the_process(sqlite_url: str, tmp_path) -> None:
    code = (
        "from chatagent import BasicAgent, ScriptedLLM\n"
        "BasicAgent(llm=ScriptedLLM(['hi']), name='env').run_nonstream([{'role': 'user', 'content': 'hello'}])\n"
    )
    env = {"CHATAGENT_TRACES": sqlite_url, "PATH": "/usr/bin:/bin", "CHATAGENT_WORKSPACE": str(tmp_path / "w")}
    processes.run([sys.executable, "-c", code], check=True, env=env, timeout=120)  # written at exit
    assert [(t.name, t.title) for t in TraceStore(sqlite_url).list("local")] == [("env", "hello")]


def test_failures_are_recorded_with_their_error(sqlite_url: str) -> None:
    bot = BasicAgent(llm=ScriptedLLM([ModelServiceError(400, "bad request")]), name="fails", traces=sqlite_url)
    with pytest.raises(ModelServiceError):
        bot.run_nonstream(USER)
    trace = only_trace(sqlite_url)
    assert trace["status"] == "error" and "ModelServiceError" in trace["error"]
    assert "bad request" in trace["steps"][1]["error"]
    assert TraceStore(sqlite_url).list("local", status="error")[0].id == trace["id"]


def test_arun_records_the_same_trace(sqlite_url: str) -> None:
    async def go() -> None:
        async for _ in tool_bot(sqlite_url).arun(USER):
            pass

    asyncio.run(go())
    assert [k for k, _, _ in kinds(only_trace(sqlite_url))] == ["run", "model", "tool", "model"]


def test_a_crews_run_is_a_tree_of_tasks_and_the_runs_of_their_agents(sqlite_url: str) -> None:
    analyst = FnCallAgent(llm=ScriptedLLM([tool_call("weather", {"city": "Oslo"}), "FACT: sunny."]),
                          function_list=[weather], name="analyst")  # fmt: skip
    writer = BasicAgent(llm=ScriptedLLM(["BRIEF: go outside."]), name="writer")
    crew = Crew(agents=[analyst, writer], tasks=[Task("Facts about {input}", "facts", agent=analyst),
                                                 Task("A brief", "one line", agent=writer)], name="desk")  # fmt: skip
    traces.record_traces(sqlite_url)
    crew.kickoff(inputs={"input": "Oslo"})
    trace = only_trace(sqlite_url)
    assert kinds(trace) == [
        ("run", "desk", None),
        ("task", "Task 1", 1), ("run", "analyst", 2), ("model", "scripted", 3), ("tool", "weather", 3),
        ("model", "scripted", 3),
        ("task", "Task 2", 1), ("run", "writer", 7), ("model", "scripted", 8),
    ]  # fmt: skip
    first = trace["steps"][1]
    assert first["data"]["agent"] == "analyst" and first["data"]["description"] == "Facts about Oslo"
    assert first["data"]["output"] == "FACT: sunny." and first["duration"] >= 0


def test_a_handoff_is_a_step_followed_by_the_receivers_run(sqlite_url: str) -> None:
    billing = FnCallAgent(llm=ScriptedLLM(["Refund sent."]), name="billing")
    triage = FnCallAgent(llm=ScriptedLLM([tool_call("transfer_to_billing", {})]), name="triage", handoffs=[billing],
                         traces=sqlite_url)  # fmt: skip
    triage.run_nonstream([{"role": "user", "content": "refund"}])
    assert kinds(only_trace(sqlite_url)) == [("run", "triage", None), ("model", "scripted", 1),
                                             ("tool", "transfer_to_billing", 1), ("handoff", "billing", 1),
                                             ("run", "billing", 1), ("model", "scripted", 5)]  # fmt: skip


def test_a_flows_methods_are_steps_with_the_runs_they_made(sqlite_url: str) -> None:
    bot = BasicAgent(llm=ScriptedLLM(default="A plan."), name="planner")

    class Trip(Flow):
        @flow_start()
        def plan(self):
            return bot.run_nonstream([{"role": "user", "content": "Plan a trip"}])[-1]["content"]

        @listen(plan)
        def book(self, plan):
            if "plan" not in plan.lower():
                raise ValueError("no plan")
            return "booked"

    traces.record_traces(sqlite_url)
    assert Trip(persist=False).kickoff() == "booked"
    trace = only_trace(sqlite_url)
    assert trace["kind"] == "flow" and trace["name"] == "Trip"
    assert kinds(trace) == [("flow", "Trip", None), ("flow_step", "plan", 1), ("run", "planner", 2),
                            ("model", "scripted", 3), ("flow_step", "book", 1)]  # fmt: skip
    assert trace["steps"][4]["data"]["output"] == "booked"


def test_a_callback_of_the_agent_still_sees_every_event_beside_the_recorder(sqlite_url: str) -> None:
    class Seen(Callbacks):
        def __init__(self) -> None:
            self.tools: list[str] = []

        def on_tool_end(self, event):  # noqa: ANN001
            self.tools.append(event.tool)

    seen = Seen()
    tool_bot(sqlite_url, callbacks=[seen]).run_nonstream(USER)
    assert seen.tools == ["weather"] and len(only_trace(sqlite_url)["steps"]) == 4


def test_a_bad_traces_option_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="traces must be"):
        BasicAgent(llm=ScriptedLLM(["x"]), traces=3)


def test_a_run_that_pauses_for_a_person_records_what_it_waits_for(sqlite_url: str) -> None:
    """A tool's question (chatagent.ask_user) and a call waiting for approval are steps of the trace, under the
    run that paused, with what the person is asked; the typed event stream still gives one interrupt per pause."""
    from chatagent import ask_user
    from chatagent.run.trace_body import summary

    @tool
    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city} on {ask_user(f'Which date for {city}?')}"

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    asker = FnCallAgent(llm=ScriptedLLM([tool_call("book", {"city": "Rome"})]), function_list=[book], name="trips",
                        traces=sqlite_url)  # fmt: skip
    events = [e for e in asker.run([{"role": "user", "content": "Book Rome."}], events=True) if e.type == "interrupt"]
    payer = FnCallAgent(llm=ScriptedLLM([tool_call("pay", {"amount": 5})]), function_list=[pay], name="payer",
                        traces=sqlite_url)  # fmt: skip
    payer.run_nonstream([{"role": "user", "content": "Pay 5."}], approval="ask")
    assert traces.flush_traces(30)
    store = TraceStore(sqlite_url)
    by_name = {t.name: store.get("local", t.id) for t in store.list("local")}
    asked = [s for s in by_name["trips"]["steps"] if s["kind"] == "interrupt"]
    assert len(asked) == 1 and asked[0]["parent"] == 1
    assert asked[0]["data"]["questions"][0]["question"] == "Which date for Rome?"
    assert summary(asked[0], by_name["trips"]) == "Which date for Rome?"
    waiting = [s for s in by_name["payer"]["steps"] if s["kind"] == "interrupt"]
    assert len(waiting) == 1 and waiting[0]["data"]["approval"][0]["name"] == "pay"
    assert summary(waiting[0], by_name["payer"]) == "approval of pay"
    assert len(events) == 1 and events[0].data["questions"][0]["question"] == "Which date for Rome?"
