"""Events: a run builds an Event only for the kinds some callback handles; which callbacks handle a kind."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from chatagent import FnCallAgent, ScriptedLLM, tool, tool_call
from chatagent.run import driver as driver_module
from chatagent.run import events
from chatagent.run.events import Callbacks, Event, handlers

USER = [{"role": "user", "content": "Weather in Oslo?"}]


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def tool_bot() -> FnCallAgent:
    return FnCallAgent(llm=ScriptedLLM([tool_call("weather", {"city": "Oslo"}), "Sunny."]), function_list=[weather])


class Ends(Callbacks):
    """Handles the end of things only (like chatagent.telemetry)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_run_end(self, event: Event) -> None:
        self.seen.append(event.kind)

    def on_llm_end(self, event: Event) -> None:
        self.seen.append(event.kind)

    def on_tool_end(self, event: Event) -> None:
        self.seen.append(event.kind)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the Events the run builds, in order."""
    kinds: list[str] = []

    make_event = events.make_event

    def counted(*args: Any, **kwargs: Any) -> Event:
        event = make_event(*args, **kwargs)
        kinds.append(event.kind)
        return event

    monkeypatch.setattr(events, "make_event", counted)
    monkeypatch.setattr(driver_module, "make_event", counted)
    return kinds


def test_a_run_builds_only_the_events_its_callbacks_handle(built):
    ends = Ends()
    tool_bot().run_nonstream(USER, callbacks=[ends])
    assert ends.seen == ["llm_end", "tool_end", "llm_end", "run_end"]
    assert built == ends.seen  # no run_start, llm_start or tool_start Event was made for nobody


def test_a_function_beside_it_gets_every_event_and_the_object_still_only_its_own(built):
    ends, log = Ends(), []
    tool_bot().run_nonstream(USER, callbacks=[ends, log.append])
    kinds = ["run_start", "llm_start", "llm_end", "tool_start", "tool_end", "llm_start", "llm_end", "run_end"]
    assert [e.kind for e in log] == kinds and built == kinds
    assert ends.seen == ["llm_end", "tool_end", "llm_end", "run_end"]


def test_the_events_a_run_builds_are_whole_events():
    """A run builds its events with `make_event` (cheaper than `Event(...)`): each has every field set, as
    `Event(...)` would have made it, and its own `data`."""
    log: list[Event] = []
    tool_bot().run_nonstream(USER, callbacks=[log.append])
    names = [f.name for f in dataclasses.fields(Event)]
    for e in log:
        assert Event(**{name: getattr(e, name) for name in names}) == e and isinstance(e.data, dict)
    end = log[-1]
    assert end.kind == "run_end" and end.usage.completion_tokens > 0 and end.duration > 0 and end.error is None
    (tool_end,) = [e for e in log if e.kind == "tool_end"]
    assert (tool_end.tool, tool_end.result, tool_end.data["error_kind"]) == ("weather", "sunny in Oslo", None)
    first, second = events.make_event("mine", None, None), events.make_event("mine", None, None)
    assert first.data == {} and first.data is not second.data and first.time <= second.time


def test_a_global_callback_also_given_to_the_run_gets_each_event_once():
    """A run given its caller's callbacks (ParallelDocQA's members get the run's) holds the global ones already."""
    log: list[Event] = []
    events.add_global_callback(log.append)
    try:
        tool_bot().run_nonstream(USER, callbacks=[log.append])
    finally:
        events.remove_global_callback(log.append)
    assert [e.kind for e in log].count("run_start") == 1 and [e.kind for e in log].count("llm_end") == 2


def test_handlers_of_a_kind():
    ends = Ends()

    def fn(event: Event) -> None: ...

    class Attribute:  # an on_<kind> function set on the object itself
        def __init__(self) -> None:
            self.on_llm_start = fn

    class CallableCallbacks(Callbacks):  # callable, but a Callbacks: only its on_<kind> methods count
        def __call__(self, event: Event) -> None: ...

    holder = Attribute()
    assert handlers([ends], "llm_start") == [] and handlers([ends], "llm_end") == [ends.on_llm_end]
    assert handlers([fn, ends, object(), CallableCallbacks()], "tool_start") == [fn]
    assert handlers([holder], "llm_start") == [fn] and handlers([holder], "llm_end") == []
    assert handlers([fn, ends], "my_kind") == [fn]  # a kind of one's own: functions get it


def test_a_failing_handler_is_logged_and_the_next_still_runs(caplog):
    got = []

    def broken(event: Event) -> None:
        raise RuntimeError("boom")

    with caplog.at_level("ERROR", logger="chatagent.run.events"):
        events.emit([broken, got.append], Event("llm_end"))
    assert [e.kind for e in got] == ["llm_end"]
    assert "failed on llm_end" in caplog.text and "boom" in caplog.text


def test_global_callbacks_as_they_are_at_each_run(built):
    """What handles each kind among the global callbacks is worked out when they change: a run sees the ones
    installed when it starts, beside its own."""
    ends, log, mine = Ends(), [], []
    events.add_global_callback(ends)
    try:
        tool_bot().run_nonstream(USER)
        assert ends.seen == ["llm_end", "tool_end", "llm_end", "run_end"] and built == ends.seen
        events.add_global_callback(log.append)
        tool_bot().run_nonstream(USER, callbacks=[mine.append])
        events.remove_global_callback(ends)
        tool_bot().run_nonstream(USER)
    finally:
        events.remove_global_callback(ends)
        events.remove_global_callback(log.append)
    kinds = ["run_start", "llm_start", "llm_end", "tool_start", "tool_end", "llm_start", "llm_end", "run_end"]
    assert ends.seen == ["llm_end", "tool_end", "llm_end", "run_end"] * 2
    assert [e.kind for e in mine] == kinds and [e.kind for e in log] == kinds * 2
    assert events.global_callbacks == () and handlers(events.global_callbacks, "run_end") == []
