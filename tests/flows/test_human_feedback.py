"""`@human_feedback` flows (chatagent.crewai.flow.human_feedback): paused for a person on a shared surface, owned by
whom the run acts for, resumed with the feedback only by that owner, the question in the flow's record (what
`chatagent serve`'s /v1/jobs shows of a flow job)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from chatagent.crewai.events import FlowPausedEvent, HumanFeedbackReceivedEvent, HumanFeedbackRequestedEvent
from chatagent.crewai.events.bus import crewai_event_bus
from chatagent.crewai.flow import Flow, HumanFeedbackPending, HumanFeedbackResult, human_feedback, listen, start
from chatagent.crewai.flow.persistence import SQLiteFlowPersistence
from chatagent.run.trust import Trust, acting_as
from chatagent.sessions.flow_states import FlowStates
from tests.support import processes

ALICE = Trust(principal="client:alice", shared=True)
BOB = Trust(principal="client:bob", shared=True)


class Outcomes:
    """A model that answers the feedback classifications in turn, and keeps what it was asked."""

    model = "scripted"

    def __init__(self, *said: str) -> None:
        self.said, self.asked = list(said), []

    def call(self, messages, **kwargs):
        self.asked.append(messages[-1]["content"])
        return self.said.pop(0)


CLASSIFY = Outcomes()


class Review(Flow):
    runs = 0

    @start()
    def draft(self):
        return "a draft"

    @human_feedback(message="Publish this?", emit=["approved", "rejected"], llm=CLASSIFY, default_outcome="rejected")
    @listen(draft)
    def review(self, text):
        type(self).runs += 1
        return text.upper()

    @listen("approved")
    def publish(self, result: HumanFeedbackResult):
        return f"published {result.output} ({result.feedback})"

    @listen("rejected")
    def drop(self, result: HumanFeedbackResult):
        return "dropped"


class Note(Flow):
    @start()
    @human_feedback(message="Any comment?")
    def write(self):
        return {"text": "hello"}

    @listen(write)
    def read(self, result: HumanFeedbackResult):
        return [result.feedback, result.outcome, result.output]


@pytest.fixture
def store(tmp_path):
    return SQLiteFlowPersistence(str(tmp_path / "flows.db"))


def test_a_served_flow_pauses_for_its_owner_and_only_the_owner_resumes_it(store):
    CLASSIFY.said[:] = ["approved"]
    Review.runs = 0
    with acting_as(ALICE):
        paused = Review(persistence=store).kickoff()
    assert isinstance(paused, HumanFeedbackPending)
    flow_id = paused.context.flow_id
    assert paused.context.method_output == "A DRAFT" and paused.context.emit == ["approved", "rejected"]
    _, status, record = FlowStates(store.store).load(flow_id)
    assert status == "paused" and record["owner"] == "client:alice"
    assert record["asked"]["question"] == "Publish this?" and record["asked"]["method"] == "review"
    with acting_as(BOB):  # another principal: as if there were no such flow, by either way of resuming
        with pytest.raises(ValueError, match="no flow"):
            Review.from_pending(flow_id, store)
        with pytest.raises(ValueError, match="no flow"):
            Review.resume(flow_id, "approve it", store=store.store)
    assert FlowStates(store.store).load(flow_id)[1] == "paused"
    with acting_as(ALICE):
        flow = Review.from_pending(flow_id, store)
        assert flow.pending_feedback.message == "Publish this?"
        assert flow.resume("ship it") == "published A DRAFT (ship it)"
    assert Review.runs == 1, "the reviewed method is not run again on resume"
    assert CLASSIFY.asked and "ship it" in CLASSIFY.asked[-1]
    assert [(r.method_name, r.outcome) for r in flow.human_feedback_history] == [("review", "approved")]
    assert FlowStates(store.store).load(flow_id)[1] == "done"
    with acting_as(ALICE), pytest.raises(ValueError, match="No pending feedback"):
        Review.from_pending(flow_id, store)


def test_no_feedback_takes_the_default_outcome_without_asking_the_model(store):
    CLASSIFY.said[:], CLASSIFY.asked[:] = [], []
    heard = []
    with crewai_event_bus.scoped_handlers():
        crewai_event_bus.on(HumanFeedbackRequestedEvent)(lambda source, e: heard.append((e.type, e.message)))
        crewai_event_bus.on(HumanFeedbackReceivedEvent)(lambda source, e: heard.append((e.type, e.outcome)))
        crewai_event_bus.on(FlowPausedEvent)(lambda source, e: heard.append((e.type, e.method_name)))
        with acting_as(ALICE):
            paused = Review(persistence=store).kickoff()
            assert Review.from_pending(paused.context.flow_id, store).resume("") == "dropped"
    assert CLASSIFY.asked == []
    assert heard == [("human_feedback_requested", "Publish this?"), ("flow_paused", "review"),
                     ("human_feedback_received", "rejected")]  # fmt: skip


def test_without_emit_the_listeners_get_the_result_and_the_history_survives_the_pause(store):
    with acting_as(ALICE):
        paused = Note(persistence=store).kickoff()
        flow = Note.from_pending(paused.context.flow_id, store)
        assert flow.resume("nice") == ["nice", None, {"text": "hello"}]
        assert flow.last_human_feedback.feedback == "nice"


def test_the_machine_user_gets_the_console_prompt(store, monkeypatch):
    monkeypatch.setattr("builtins.input", lambda prompt="": "fine by me")
    assert Note(persistence=store).kickoff() == ["fine by me", None, {"text": "hello"}]


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="default_outcome"):
        human_feedback(message="?", emit=["a", "b"], default_outcome="c")
    with pytest.raises(ValueError, match="requires emit"):
        human_feedback(message="?", default_outcome="a")
    with pytest.raises(ValueError, match="emit is a list"):
        human_feedback(message="?", emit="approved")
    with pytest.raises(TypeError, match="request_feedback"):
        human_feedback(message="?", provider=object())
    with pytest.raises(NotImplementedError, match="learn"):
        human_feedback(message="?", learn=True)


def test_a_process_whose_input_is_closed_pauses_and_another_process_resumes(tmp_path):
    """As on a worker: the flow is kicked off by a process with no terminal; the question is in its record; a
    second process gives the feedback."""
    script = tmp_path / "review.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        from chatagent import ScriptedLLM
        from chatagent.crewai.flow import Flow, HumanFeedbackPending, human_feedback, listen, start
        from chatagent.crewai.flow.persistence import SQLiteFlowPersistence

        STORE = SQLiteFlowPersistence(sys.argv[1])

        class Review(Flow):
            @start()
            @human_feedback(message="Publish the haiku?", emit=["approved", "rejected"],
                            llm=ScriptedLLM(["approved"]))
            def write(self):
                return "An old silent pond"

            @listen("approved")
            def publish(self, result):
                return "published after: " + result.feedback

        if sys.argv[2] == "kickoff":
            paused = Review(persistence=STORE).kickoff()
            assert isinstance(paused, HumanFeedbackPending), paused
            print(paused.context.flow_id)
        else:
            print(Review.from_pending(sys.argv[3], STORE).resume(sys.argv[4]))
    """)
    )
    db = str(tmp_path / "flows.db")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    first = processes.run([sys.executable, "-c", "import review", db, "kickoff"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    flow_id = first.stdout.split()[-1]
    assert FlowStates(db).load(flow_id)[2]["asked"]["question"] == "Publish the haiku?"
    second = processes.run([sys.executable, "-c", "import review", db, "resume", flow_id, "ship it"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
                           cwd=tmp_path)  # fmt: skip
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.strip().endswith("published after: ship it")


class Chained(Flow):
    @start()
    def draft(self):
        return "draft"

    @human_feedback(message="First review:", emit=["approved", "rejected"], llm=CLASSIFY)
    @listen(draft)
    def first_review(self, text):
        return f"{text} v1"

    @human_feedback(message="Final review:", emit=["publish", "hold"], llm=CLASSIFY)
    @listen("approved")
    def final_review(self, prev: HumanFeedbackResult):
        return f"{prev.output} final ({prev.feedback})"

    @listen("approved")
    def note(self, result: HumanFeedbackResult):  # waits while final_review (a router: run first) is paused
        self.state["noted"] = f"{type(result).__name__}: {result.feedback}"

    @listen("publish")
    def on_publish(self, result: HumanFeedbackResult):
        return [type(result).__name__, result.output, [r.method_name for r in self.human_feedback_history],
                self.state.get("noted")]  # fmt: skip


def test_chained_reviews_pause_twice_and_the_second_listener_gets_the_first_result_after_a_restore(store):
    CLASSIFY.said[:] = ["approved", "publish"]
    with acting_as(ALICE):
        first = Chained(persistence=store).kickoff()
        second = Chained.from_pending(first.context.flow_id, store).resume("good")
        assert isinstance(second, HumanFeedbackPending) and second.context.method_name == "final_review"
        assert second.context.method_output == "draft v1 final (good)"
        done = Chained.from_pending(second.context.flow_id, store).resume("ship")
    assert done == ["HumanFeedbackResult", "draft v1 final (good)", ["first_review", "final_review"],
                    "HumanFeedbackResult: good"]  # fmt: skip


class AsyncNote(Flow):
    @start()
    @human_feedback(message="Any comment?")
    async def write(self):
        return "async text"

    @listen(write)
    async def read(self, result: HumanFeedbackResult):
        return f"{result.output}: {result.feedback}"


def test_an_async_method_is_reviewed_and_resumed_on_the_event_loop(store):
    async def go():
        with acting_as(ALICE):
            paused = await AsyncNote(persistence=store).kickoff_async()
            return await AsyncNote.from_pending(paused.context.flow_id, store).resume_async("fine")

    assert asyncio.run(go()) == "async text: fine"
