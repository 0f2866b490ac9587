"""Flows in one process: starts, listeners, routers and their labels, or_/and_, listeners of one event running
concurrently, typed and dict state, persistence after every method, an agent run inside a method, plot()."""

from __future__ import annotations

import asyncio
import threading
import types
from pathlib import Path

import pytest

from chatagent import BasicAgent, Flow, FlowState, ScriptedLLM, and_, listen, or_, router, start
from chatagent.sessions.flow_states import FlowStates


class Trip(FlowState):
    city: str = ""
    steps: list[str] = []


def test_methods_run_on_their_triggers_and_the_router_picks_the_branch(tmp_path):
    class Plan(Flow[Trip]):
        store = str(tmp_path / "f.db")

        @start()
        def pick(self):
            self.state.steps.append("pick")
            return self.state.city

        @router(pick)
        def where(self, city):
            self.state.steps.append("where")
            return "far" if city == "Tokyo" else "near"

        @listen("far")
        def fly(self, city):
            self.state.steps.append(f"fly:{city}")
            return "flight booked"

        @listen("near")
        def drive(self):
            self.state.steps.append("drive")
            return "car booked"

        @listen(or_(fly, drive))
        def confirm(self, booked):
            self.state.steps.append("confirm")
            return f"confirmed: {booked}"

    flow = Plan()
    assert flow.kickoff(inputs={"city": "Tokyo"}) == "confirmed: flight booked"
    assert flow.state.steps == ["pick", "where", "fly:Tokyo", "confirm"]
    status, record = FlowStates(Plan.store).load(flow.id)[1:]
    assert status == "done" and record["completed"] == ["pick", "where", "fly", "confirm"]
    assert record["state"]["city"] == "Tokyo" and record["pending"] == []
    other = Plan()
    assert other.kickoff(inputs={"city": "Lyon"}) == "confirmed: car booked" and other.id != flow.id


def test_listeners_of_one_event_run_concurrently_and_and_waits_for_all():
    both_running = threading.Barrier(2, timeout=30)

    class Fan(Flow):
        @start()
        def begin(self):
            return 1

        @listen(begin)
        def left(self, n):
            both_running.wait()  # passes only when `right` runs at the same time
            return n + 1

        @listen(begin)
        def right(self, n):
            both_running.wait()
            return n + 2

        @listen(and_(left, right))
        def join(self):
            self.state["joined"] = True
            return "joined"

    flow = Fan(persist=False)
    assert flow.kickoff() == "joined" and flow.state["joined"] is True


def test_async_methods_and_akickoff():
    class Hello(Flow):
        @start()
        async def greet(self):
            await asyncio.sleep(0)
            return "hi"

        @listen(greet)
        def shout(self, text):
            return text.upper()

    assert asyncio.run(Hello(persist=False).akickoff()) == "HI"
    with pytest.raises(RuntimeError, match="akickoff"):

        async def inside():
            return Hello(persist=False).kickoff()

        asyncio.run(inside())


def test_an_agent_runs_inside_a_method():
    writer = BasicAgent(llm=ScriptedLLM(["A poem about rivers."]))

    class Poem(Flow):
        @start()
        def write(self):
            return writer.run_nonstream([{"role": "user", "content": f"Write about {self.state['topic']}"}])[-1][
                "content"]  # fmt: skip

    assert Poem(persist=False).kickoff(inputs={"topic": "rivers"}) == "A poem about rivers."


def test_a_failing_method_stops_the_flow_and_resume_tries_it_again(tmp_path):
    attempts = []

    class Fragile(Flow):
        store = str(tmp_path / "f.db")

        @start()
        def first(self):
            return "ok"

        @listen(first)
        def second(self, value):
            attempts.append(value)
            if len(attempts) == 1:
                raise ConnectionError("service down")
            return "recovered"

    flow = Fragile()
    with pytest.raises(ConnectionError):
        flow.kickoff()
    assert FlowStates(Fragile.store).load(flow.id)[1] == "failed"
    assert Fragile.resume(flow.id) == "recovered" and attempts == ["ok", "ok"]


def test_bad_flows_are_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="no @start"):

        class Empty(Flow):
            pass

        Empty()
    with pytest.raises(TypeError, match="listens to itself"):

        class Loop(Flow):
            @start()
            def a(self):
                return "b"

            @listen("b")
            def b(self):
                return None

    with pytest.raises(TypeError, match="id"):
        from pydantic import BaseModel

        class NoId(BaseModel):
            x: int = 0

        class Typed(Flow[NoId]):
            @start()
            def a(self):
                return None

        Typed()
    with pytest.raises(ValueError, match="no flow"):

        class Some(Flow):
            @start()
            def a(self):
                return None

        Some.resume("not-there", store=str(tmp_path / "f.db"))


def test_plot_writes_a_diagram_without_network(tmp_path):
    class Small(Flow):
        @start()
        def fetch(self):
            return 1

        @router(fetch)
        def check(self, n):
            return "good"

        @listen("good")
        def use(self):
            return None

    path = Small(persist=False).plot(str(tmp_path / "small"))
    text = Path(path).read_text()
    assert path.endswith("small.html") and "<svg" in text and "http" not in text.replace("http://www.w3.org", "")
    for name in ("fetch", "check", "use", "good"):
        assert f">{name}<" in text
    svg = Small(persist=False).plot(str(tmp_path / "small.svg"))
    assert Path(svg).read_text().startswith("<?xml")


def test_a_long_router_loop_runs_without_growing_the_stack():
    class Countdown(Flow):
        @start()
        def begin(self):
            self.state["left"] = 2000
            return None

        @router(or_(begin, "again"))
        def tick(self):
            self.state["left"] -= 1
            return "again" if self.state["left"] > 0 else "done"

        @listen("done")
        def finish(self):
            return "lift-off"

    flow = Countdown(persist=False)
    assert flow.kickoff() == "lift-off" and flow.state["left"] == 0


def test_a_flows_steps_go_to_its_journal_and_its_end_is_one_transaction(tmp_path, monkeypatch):
    """Each method's record used to be a SQLite transaction of its own (92 % of a persisted step's cost); now the
    steps are written as a running turn's checkpoints are, into the flow's journal beside the database, and the
    flow's end is its one transaction. A step on the way is there for another reader (as after a kill -9)."""
    from chatagent.sessions.sqlite import SQLiteStore

    states = FlowStates(str(tmp_path / "f.db"))
    seen: list[dict] = []

    def body(ns: dict) -> None:
        ns["store"] = str(tmp_path / "f.db")
        ns["m0"] = start()(lambda self: 0)
        ns["m1"] = listen("m0")(lambda self, n: seen.append(states.load(self.id)[2]) or n + 1)
        for i in range(2, 10):
            ns[f"m{i}"] = listen(f"m{i - 1}")(lambda self, n: n + 1)

    ten = types.new_class("Ten", (Flow,), exec_body=body)
    transactions = []
    write = SQLiteStore._write
    monkeypatch.setattr(SQLiteStore, "_write", lambda self, sync=True: transactions.append(sync) or write(self, sync))
    flow = ten()
    assert flow.kickoff() == 9
    assert transactions == [True]  # the end, synced
    assert seen[0]["completed"] == ["m0"] and seen[0]["pending"][0]["method"] == "m1"  # what a reader found
    status, record = states.load(flow.id)[1:]
    assert status == "done" and record["completed"] == [f"m{i}" for i in range(10)]
    assert not list((tmp_path / "f.db-locks").glob("flow-*.journal"))  # folded into the row, and removed


def test_or_runs_its_listener_once_when_both_of_its_methods_complete():
    class Both(Flow):
        @start()
        def left(self):
            return "left"

        @start()
        def right(self):
            return "right"

        @listen(or_(left, right))
        def after(self, first):
            self.state.setdefault("runs", []).append(first)
            return first

    flow = Both(persist=False)
    flow.kickoff()
    assert len(flow.state["runs"]) == 1 and flow.state["runs"][0] in ("left", "right")
