"""Tasks and crews on ScriptedLLM: sequential and hierarchical processes, placeholders, context, output_pydantic,
guardrails with retries, human input paused and resumed through a session, streaming, arun and usage."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from chatagent import Crew, FnCallAgent, ScriptedLLM, Session, Task, TaskFailed, pending_approval, tool
from chatagent.agents.teams.crew import CREW_TASK, PENDING_HUMAN_INPUT
from chatagent.llm.scripted import tool_call


class Summary(BaseModel):
    title: str
    points: list[str]


def _agent(name, replies):
    return FnCallAgent(llm=ScriptedLLM(replies), name=name, description=f"the {name}")


def test_a_sequential_crew_fills_placeholders_and_passes_context():
    writer = _agent("writer", ["Rivers carry water to the sea."])
    editor = _agent("editor", ["Rivers carry fresh water to the sea."])
    draft = Task("Write about {topic}", "one {size} paragraph", agent=writer)
    edit = Task("Edit the draft", "the edited paragraph", agent=editor, context=[draft])
    out = Crew(agents=[writer, editor], tasks=[draft, edit]).kickoff(inputs={"topic": "rivers", "size": "short"})
    assert out.raw == "Rivers carry fresh water to the sea."
    assert [(t.description, t.raw, t.agent) for t in out.tasks_output] == [
        ("Write about rivers", "Rivers carry water to the sea.", "writer"),
        ("Edit the draft", "Rivers carry fresh water to the sea.", "editor"),
    ]
    asked = writer.llm.calls[0].messages[-1].content
    assert "Write about rivers" in asked and "one short paragraph" in asked
    given = editor.llm.calls[0].messages[-1].content
    assert "Rivers carry water to the sea." in given  # the draft's output, as context
    assert out.usage.calls == 2 and out.token_usage is out.usage


def test_the_crew_streams_each_task_named_by_its_agent():
    writer, editor = _agent("writer", ["Draft."]), _agent("editor", ["Edited."])
    crew = Crew(agents=[writer, editor], tasks=[Task("Write", "a draft", agent=writer),
                                                 Task("Edit", "the text", agent=editor)])  # fmt: skip
    steps = list(crew.run())
    last = steps[-1]
    assert [(m.get("name"), m["content"]) for m in last] == [
        ("crew", "Task 1/2 (writer): Write"),
        ("writer", "Draft."),
        ("crew", "Task 2/2 (editor): Edit"),
        ("editor", "Edited."),
    ]
    assert last[0]["extra"][CREW_TASK]["index"] == 0
    assert len(steps) > 4  # the answers streamed piece by piece


def test_output_pydantic_is_validated_and_retried_with_the_error():
    analyst = _agent("analyst", ['{"title": "Rivers"}', '{"title": "Rivers", "points": ["wet"]}'])
    out = Crew(agents=[analyst], tasks=[Task("Summarise", "a summary", output_pydantic=Summary)]).kickoff()
    assert out.pydantic == Summary(title="Rivers", points=["wet"])
    assert out.json_dict == {"title": "Rivers", "points": ["wet"]}
    assert "points" in analyst.llm.calls[1].messages[-1].content  # told what was wrong


def test_a_guardrail_sends_the_answer_back_until_it_passes_or_fails_the_task():
    def long_enough(output):
        return (True, output.raw.strip()) if len(output.raw) > 20 else (False, "Write at least 20 characters.")

    writer = _agent("writer", ["Too short.", "Now this is long enough to pass."])
    task = Task("Write", "a sentence", agent=writer, guardrail=long_enough)
    assert Crew(agents=[writer], tasks=[task]).kickoff().raw == "Now this is long enough to pass."
    assert "Write at least 20 characters." in writer.llm.calls[1].messages[-1].content

    stubborn = _agent("writer", ["short"] * 3)
    task = Task("Write", "a sentence", agent=stubborn, guardrail=long_enough, guardrail_max_retries=2)
    with pytest.raises(TaskFailed, match="did not pass its guardrail after 3 tries"):
        Crew(agents=[stubborn], tasks=[task]).kickoff()


def test_a_text_guardrail_is_judged_by_the_agents_model():
    writer = _agent("writer", ["Rivers are wet.", '{"valid": false, "feedback": "Mention the sea."}',
                               "Rivers flow to the sea.", '{"valid": true}'])  # fmt: skip
    task = Task("Write", "a sentence", agent=writer, guardrail="It mentions the sea.")
    assert Crew(agents=[writer], tasks=[task]).kickoff().raw == "Rivers flow to the sea."
    assert "Mention the sea." in writer.llm.calls[2].messages[-1].content


def test_human_input_pauses_and_resumes_through_a_session(tmp_path):
    writer, editor = _agent("writer", ["Draft one.", "Draft two."]), _agent("editor", ["Edited draft two."])
    crew = Crew(agents=[writer, editor], tasks=[Task("Write about {topic}", "a draft", agent=writer, human_input=True),
                                                 Task("Edit it", "the final text", agent=editor)])  # fmt: skip
    s = Session("review", store=str(tmp_path / "s.db"))
    out = crew.kickoff(inputs={"topic": "rivers"}, session=s)
    assert out.pending == {"task": 0, "description": "Write about rivers", "agent": "writer"}
    assert out.raw == "" and s.messages()[-1]["extra"][PENDING_HUMAN_INPUT]["task"] == 0
    out = crew.kickoff(feedback="Make it better.", session=s)  # sent back to the writer, then reviewed again
    assert out.pending is not None and out.tasks_output[0].raw == "Draft two."
    assert "Make it better." in writer.llm.calls[1].messages[-1].content
    out = crew.kickoff(feedback="", session=s)  # accepted: the crew goes on
    assert out.pending is None and out.raw == "Edited draft two."
    assert [t.raw for t in out.tasks_output] == ["Draft two.", "Edited draft two."]
    with pytest.raises(ValueError, match="session"):
        crew.kickoff(feedback="more")


def _publishing_team(sent):
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text.

        Args:
            text: what to publish.
        """
        sent.append(text)
        return "published"

    writer = _agent("writer", ["Rivers shape valleys.", "Rivers carve valleys."])
    publisher = FnCallAgent(llm=ScriptedLLM([tool_call("publish", {"text": "Rivers shape valleys."}), "Published it.",
                                             tool_call("publish", {"text": "x"}), "Not published."]),
                            name="publisher", function_list=[publish])  # fmt: skip
    tasks = [Task("Write about {topic}", "a sentence", agent=writer), Task("Publish it", "done", agent=publisher)]
    return writer, publisher, Crew(agents=[writer, publisher], tasks=tasks)


def test_a_tool_waiting_for_approval_pauses_the_crew_and_the_decision_resumes_it(tmp_path):
    sent = []
    writer, publisher, crew = _publishing_team(sent)
    s = Session("publish", store=str(tmp_path / "s.db"))
    out = crew.kickoff(inputs={"topic": "rivers"}, session=s)
    paused = s.pending_turn  # a pause for approval is a pending turn in the store until the decision
    assert paused is not None and paused.kind == "approval" and s.messages() == []
    waiting = pending_approval(paused.response)
    assert waiting is not None and waiting[0]["name"] == "publish" and sent == []  # nothing ran before the decision
    assert out.pending == {"task": 1, "agent": "publisher", "approval": waiting} and out.raw == ""
    assert [t.raw for t in out.tasks_output] == ["Rivers shape valleys."]
    out = crew.kickoff(approval=True, session=s)  # the publisher goes on where it stopped; the writer is not asked
    assert sent == ["Rivers shape valleys."] and out.pending is None and out.raw == "Published it."
    assert [t.raw for t in out.tasks_output] == ["Rivers shape valleys.", "Published it."]
    assert len(writer.llm.calls) == 1 and len(publisher.llm.calls) == 2
    assert publisher.llm.calls[1].messages[-1].role == "function"  # the model reads the result of its call
    with pytest.raises(ValueError, match="one of them"):
        crew.kickoff(inputs={"topic": "x"}, approval=True, session=s)


def test_a_denied_call_reaches_the_tasks_agent_and_the_crew_goes_on(tmp_path):
    sent = []
    _, publisher, crew = _publishing_team(sent)
    publisher.llm = ScriptedLLM([tool_call("publish", {"text": "x"}), "Not published: denied."])
    s = Session("deny", store=str(tmp_path / "s.db"))
    crew.kickoff(inputs={"topic": "rivers"}, session=s)
    run = crew.run(approval=False, session=s)
    response = list(run)[-1]
    assert sent == [] and run.context.output.raw == "Not published: denied."
    assert "denied" in publisher.llm.calls[1].messages[-1].content
    assert all(m.get("name") in ("publisher", "publish") for m in response)  # no task started again


def test_in_a_hierarchical_crew_the_approval_resumes_the_coworker_inside_the_manager(tmp_path):
    sent = []
    _, publisher, _ = _publishing_team(sent)
    manager = ScriptedLLM([tool_call("delegate_work_to_coworker", {"task": "Publish it", "coworker": "publisher"}),
                           "Checked: Published it."])  # fmt: skip
    crew = Crew(agents=[publisher], tasks=[Task("Publish {what}", "done")], process="hierarchical", manager=manager)
    s = Session("hier", store=str(tmp_path / "s.db"))
    assert crew.kickoff(inputs={"what": "it"}, session=s).pending["agent"] == "manager" and sent == []
    out = crew.kickoff(approval=True, session=s)
    assert sent == ["Rivers shape valleys."] and out.raw == "Checked: Published it."
    assert len(manager.calls) == 2 and len(publisher.llm.calls) == 2


def test_a_hierarchical_crew_delegates_through_its_manager():
    writer = _agent("writer", ["Rivers shape valleys."])
    manager = ScriptedLLM(
        [
            tool_call("delegate_work_to_coworker", {"task": "Write about rivers", "coworker": "writer"}),
            "Checked: Rivers shape valleys.",
        ]
    )
    crew = Crew(agents=[writer], tasks=[Task("Write about {topic}", "a sentence")], process="hierarchical",
                manager=manager)  # fmt: skip
    run = crew.run({"topic": "rivers"})
    last = list(run)[-1]
    assert [m.get("name") for m in last] == ["crew", "manager", "writer", "delegate_work_to_coworker", "manager"]
    assert last[2]["extra"]["nested_in"]  # the coworker's run is nested in the manager's
    assert last[-1]["content"] == "Checked: Rivers shape valleys."
    assert run.usage.calls == 3


def test_akickoff_on_the_event_loop():
    writer = _agent("writer", ["Async draft."])
    crew = Crew(agents=[writer], tasks=[Task("Write", "a draft")])
    assert asyncio.run(crew.akickoff()).raw == "Async draft."


def test_bad_crews_and_inputs_are_clear_errors():
    writer = _agent("writer", [])
    with pytest.raises(ValueError, match="topic"):
        Crew(agents=[writer], tasks=[Task("Write about {topic}", "x")]).kickoff(inputs={})
    with pytest.raises(ValueError, match="manager"):
        Crew(agents=[writer], tasks=[Task("Write", "x")], process="hierarchical")
    with pytest.raises(ValueError, match="no agent"):
        Crew(agents=[writer, _agent("other", [])], tasks=[Task("Write", "x")])
    with pytest.raises(TypeError, match="unexpected"):
        Crew(agents=[writer], tasks=[Task("Write", "x")], verbose_mode=True)
    with pytest.raises(ValueError, match="expected_output"):
        Task("Write", "")


def test_task_tools_replace_the_agents_and_events_see_every_run():
    def word_count(text: str) -> int:
        """Count the words of a text.

        Args:
            text: the text.
        """
        return len(text.split())

    counter = _agent("counter", [tool_call("word_count", {"text": "rivers run deep"}), "Three words."])
    seen = []
    crew = Crew(agents=[counter], tasks=[Task("Count the words of 'rivers run deep'", "a number", tools=[word_count])])
    out = crew.kickoff(callbacks=[lambda event: seen.append((event.kind, event.agent, event.tool))])
    assert out.raw == "Three words."
    assert counter.function_map == {}  # the agent itself is unchanged
    assert ("run_start", "crew", None) in seen and ("run_start", "counter", None) in seen
    assert ("tool_end", "counter", "word_count") in seen
    assert [k for k, _, _ in seen].count("llm_end") == 2


_CREW_CHILD = """
import sys, time
from chatagent import Crew, FnCallAgent, ScriptedLLM, Session, Task
from chatagent.llm.base import BaseChatModel

class Hangs(BaseChatModel):
    def _chat_stream(self, messages, functions, cfg, usage):
        print("task 2 started", flush=True)
        while True:
            time.sleep(1)
        yield []

writer = FnCallAgent(llm=ScriptedLLM(["Rivers carry water to the sea."]), name="writer")
editor = FnCallAgent(llm=Hangs({"model": "hangs"}), name="editor")
draft = Task("Write about {topic}", "a paragraph", agent=writer)
edit = Task("Edit the draft", "the edited paragraph", agent=editor, context=[draft])
Crew(agents=[writer, editor], tasks=[draft, edit]).kickoff(inputs={"topic": "rivers"}, session=Session("c", sys.argv[1]))
"""


@pytest.mark.timeout(120)
def test_a_crew_killed_during_task_2_resumes_from_its_last_completed_task(tmp_path):
    """Issue 43.11: after kill -9 during task 2, `kickoff` said to resume and `as_agent().resume(session=s)` raised
    'a crew starts (or resumes) on a user message'. It goes on from task 2: the writer is not asked again (its
    script is empty here), the editor gets the draft as context."""
    import subprocess
    import sys

    from chatagent.sessions.errors import SessionPendingTurnError
    from tests.support import processes

    store = str(tmp_path / "s.db")
    child = processes.popen([sys.executable, "-c", _CREW_CHILD, store], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "task 2 started"
    finally:
        child.kill()  # SIGKILL: no cleanup of any kind
        child.wait(30)
    writer = _agent("writer", [])  # asked again, it would fail: nothing scripted
    editor = _agent("editor", ["Rivers carry fresh water to the sea."])
    draft = Task("Write about {topic}", "a paragraph", agent=writer)
    edit = Task("Edit the draft", "the edited paragraph", agent=editor, context=[draft])
    crew = Crew(agents=[writer, editor], tasks=[draft, edit])
    s = Session("c", store)
    with pytest.raises(SessionPendingTurnError, match="resume"):
        crew.kickoff(inputs={"topic": "rivers"}, session=s)
    out = crew.resume(session=s)
    assert [t.raw for t in out.tasks_output] == [
        "Rivers carry water to the sea.",
        "Rivers carry fresh water to the sea.",
    ]
    assert writer.llm.calls == [] and "Rivers carry water to the sea." in editor.llm.calls[0].messages[-1].content
    shown = [m["content"] for m in s.messages() if m["role"] == "assistant"]
    assert shown.count("Task 2/2 (editor): Edit the draft") == 1 and s.pending_turn is None
    with pytest.raises(Exception, match="no turn to resume"):
        crew.resume(session=s)


def test_a_crew_whose_run_failed_in_task_2_resumes_through_its_agent(tmp_path):
    from chatagent import ModelServiceError

    writer = _agent("writer", ["Rivers carry water to the sea."])
    editor = _agent("editor", [ModelServiceError(500, "the model is down"), "Rivers carry fresh water."])
    draft = Task("Write about {topic}", "a paragraph", agent=writer)
    edit = Task("Edit the draft", "the edited paragraph", agent=editor, context=[draft])
    crew = Crew(agents=[writer, editor], tasks=[draft, edit])
    s = Session("c", str(tmp_path / "s.db"))
    with pytest.raises(ModelServiceError):
        crew.kickoff(inputs={"topic": "rivers"}, session=s)
    last = list(crew.as_agent().resume(session=s))[-1]
    assert last[-1]["content"] == "Rivers carry fresh water." and len(writer.llm.calls) == 1
