"""OpenTelemetry: spans of runs, model calls and tool calls with the GenAI conventions, nested per run, in threads
and under arun; content only when asked; nothing imported when off; exported over OTLP/HTTP to a real receiver."""

from __future__ import annotations

import asyncio
import http.server
import sys
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatagent import BasicAgent, FnCallAgent, GroupChat, ModelServiceError, ScriptedLLM, tool, tool_call
from chatagent.run import driver as driver_module
from chatagent.run import events, telemetry
from tests.support import processes

USER = [{"role": "user", "content": "Weather in Oslo and Rome?"}]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans recorded in memory while chatagent is instrumented (`spans.provider` is the TracerProvider)."""
    exporter = InMemorySpanExporter()
    exporter.provider = provider = TracerProvider()  # type: ignore[attr-defined]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    try:
        yield exporter
    finally:
        telemetry.uninstrument()
        provider.shutdown()


def weather_bot(fail: bool = False) -> FnCallAgent:
    @tool
    def weather(city: str) -> str:
        """Weather in a city."""
        if fail and city == "Rome":
            raise RuntimeError("station offline")
        return f"sunny in {city}"

    llm = ScriptedLLM(
        [[tool_call("weather", {"city": "Oslo"}), tool_call("weather", {"city": "Rome"})], "Sunny in both."],
        model="test-model",
    )
    return FnCallAgent(llm=llm, function_list=[weather], name="forecaster")


def by_name(exporter: InMemorySpanExporter) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in exporter.get_finished_spans():
        out.setdefault(s.name, []).append(s)
    return out


def check_tool_run(found: dict[str, list]) -> None:
    (run,) = found["invoke_agent forecaster"]
    chats, tools = found["chat test-model"], found["execute_tool weather"]
    assert len(chats) == 2 and len(tools) == 2
    for s in chats + tools:
        assert s.parent is not None and s.parent.span_id == run.context.span_id
        assert s.context.trace_id == run.context.trace_id
    assert dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "forecaster",
        "gen_ai.usage.input_tokens": run.attributes["gen_ai.usage.input_tokens"],
        "gen_ai.usage.output_tokens": run.attributes["gen_ai.usage.output_tokens"],
    }
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.request.model"] == "test-model"
    assert first["gen_ai.provider.name"] == "scripted" and first["gen_ai.usage.input_tokens"] > 0
    assert (
        sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == run.attributes["gen_ai.usage.output_tokens"]
    )
    assert {t.attributes["gen_ai.tool.call.id"] for t in tools} == {"call_1_0", "call_1_1"}
    assert all(t.attributes["gen_ai.tool.name"] == "weather" for t in tools)
    assert all(run.start_time <= s.start_time <= s.end_time <= run.end_time for s in chats + tools)
    assert (
        chats[0].end_time <= min(t.start_time for t in tools) <= max(t.end_time for t in tools) <= chats[1].start_time
    )
    for s in chats + tools:  # no content unless asked
        assert not any(k in s.attributes for k in ("gen_ai.input.messages", "gen_ai.tool.call.arguments"))


def test_a_tool_run_is_one_trace_of_nested_spans(spans):
    weather_bot().run_nonstream(USER)
    check_tool_run(by_name(spans))


def test_arun_gives_the_same_trace(spans):
    asyncio.run(weather_bot().arun_nonstream(USER))
    check_tool_run(by_name(spans))


def test_runs_in_threads_get_one_trace_each(spans):
    threads = [threading.Thread(target=weather_bot().run_nonstream, args=(USER,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    found = by_name(spans)
    runs = found["invoke_agent forecaster"]
    assert len(runs) == 4 and len({r.context.trace_id for r in runs}) == 4
    for s in found["chat test-model"] + found["execute_tool weather"]:
        assert [r for r in runs if r.context.span_id == s.parent.span_id and r.context.trace_id == s.context.trace_id]


def test_a_run_goes_under_the_callers_span_and_a_members_run_under_the_group(spans):
    alice = BasicAgent(llm=ScriptedLLM(["Hi."], model="m"), name="alice")
    chat = GroupChat(agents=[alice], selection="round_robin", max_rounds=1, name="room")
    with spans.provider.get_tracer("app").start_as_current_span("request"):
        chat.run_nonstream(USER)
    found = by_name(spans)
    (request,) = found["request"]
    (room,) = found["invoke_agent room"]
    (member,) = found["invoke_agent alice"]
    (call,) = found["chat m"]
    assert room.parent.span_id == request.context.span_id
    assert member.parent.span_id == room.context.span_id and call.parent.span_id == member.context.span_id
    assert len({s.context.trace_id for s in (request, room, member, call)}) == 1


def test_errors_mark_the_spans(spans):
    weather_bot(fail=True).run_nonstream(USER)
    tools = {t.attributes["gen_ai.tool.call.id"]: t for t in by_name(spans)["execute_tool weather"]}
    assert tools["call_1_1"].attributes["error.type"] == "exception"
    assert tools["call_1_1"].status.status_code.name == "ERROR"
    assert tools["call_1_1"].status.description == "exception"  # the error's text is content: not without capture
    assert tools["call_1_0"].status.status_code.name == "UNSET"
    spans.clear()
    llm = ScriptedLLM([ModelServiceError(400, "bad request")], model="m")
    with pytest.raises(ModelServiceError):
        BasicAgent(llm=llm, name="b").run_nonstream(USER)
    found = by_name(spans)
    assert found["chat m"][0].attributes["error.type"] == "ModelServiceError"
    assert found["invoke_agent b"][0].status.status_code.name == "ERROR"


def test_content_only_when_asked(spans):
    telemetry.instrument(spans.provider, capture_content=True)
    weather_bot().run_nonstream(USER)
    found = by_name(spans)
    chat = found["chat test-model"][1]
    assert '"Weather in Oslo and Rome?"' in chat.attributes["gen_ai.input.messages"]
    assert '"Sunny in both."' in chat.attributes["gen_ai.output.messages"]
    t = found["execute_tool weather"][0]
    assert t.attributes["gen_ai.tool.call.arguments"] == '{"city": "Oslo"}'
    assert t.attributes["gen_ai.tool.call.result"] == "sunny in Oslo"


def test_off_means_no_opentelemetry_import_and_no_events():
    code = (
        "import sys\n"
        "from chatagent import BasicAgent, ScriptedLLM, telemetry\n"
        "from chatagent.run.events import global_callbacks\n"
        "BasicAgent(llm=ScriptedLLM(['hi'])).run_nonstream([{'role': 'user', 'content': 'x'}])\n"
        "print(any(m.startswith('opentelemetry') for m in sys.modules), global_callbacks)\n"
    )
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "()"]


def test_uninstrument_stops_the_spans(spans):
    telemetry.uninstrument()
    weather_bot().run_nonstream(USER)
    assert spans.get_finished_spans() == ()


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append((self.path, self.headers.get("Content-Type"), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_spans_reach_an_otlp_http_receiver():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _Receiver.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider = TracerProvider()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=10)))
    telemetry.instrument(provider)
    try:
        weather_bot().run_nonstream(USER)
    finally:
        telemetry.uninstrument()
        provider.shutdown()
        server.shutdown()
        thread.join(10)
    received = []
    for path, content_type, body in _Receiver.bodies:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                assert ss.scope.name == "chatagent"
                for s in ss.spans:
                    attrs = {a.key: a.value for a in s.attributes}
                    received.append((s.name, attrs["gen_ai.operation.name"].string_value))
    assert sorted(received) == [
        ("chat test-model", "chat"),
        ("chat test-model", "chat"),
        ("execute_tool weather", "execute_tool"),
        ("execute_tool weather", "execute_tool"),
        ("invoke_agent forecaster", "invoke_agent"),
    ]


def test_sampling_traces_a_share_of_runs_whole_and_leaves_the_others_without_a_call(spans):
    """`sample=` keeps that share of top-level runs, each with all its spans (a group chat member's run follows the
    group chat's); a run left out calls OpenTelemetry not once."""
    import random

    from opentelemetry.sdk.trace import Tracer

    telemetry.instrument(spans.provider, sample=0.5)
    random.seed(7)
    calls = []
    real = Tracer.start_span
    Tracer.start_span = lambda self, *a, **k: (calls.append(a[0]), real(self, *a, **k))[1]  # counts, then starts
    try:
        for _ in range(40):
            weather_bot().run_nonstream(USER)
        member = BasicAgent(llm=ScriptedLLM(default="Agreed."), name="member")
        for _ in range(10):
            room = GroupChat([member], selection="round_robin", max_rounds=1, name="room")
            room.run_nonstream([{"role": "user", "content": "hi"}])
    finally:
        Tracer.start_span = real
    found = by_name(spans)
    runs = found["invoke_agent forecaster"]
    assert 8 < len(runs) < 32  # about half of 40
    assert len(found["chat test-model"]) == 2 * len(runs) and len(found["execute_tool weather"]) == 2 * len(runs)
    groups, members = found["invoke_agent room"], found["invoke_agent member"]
    assert 0 < len(groups) < 10 and len(members) == len(groups)  # the members' runs follow their group chat's
    assert {m.parent.span_id for m in members} == {g.context.span_id for g in groups}
    assert len(calls) == len(spans.get_finished_spans())  # no span started for a run left out
    with pytest.raises(ValueError, match="sample must be a number from 0 to 1"):
        telemetry.instrument(spans.provider, sample=1.5)


def test_a_run_left_out_builds_no_more_events_for_tracing(spans, monkeypatch):
    """A run that sampling leaves out drops the tracing callback from its callbacks (and so from the runs inside
    it): after its run_start, no Event is built for tracing; a callback of the run's own still gets its events."""
    built: list[str] = []
    make_event = events.make_event

    def counted(*args, **kwargs):
        event = make_event(*args, **kwargs)
        built.append(event.kind)
        return event

    monkeypatch.setattr(events, "make_event", counted)
    monkeypatch.setattr(driver_module, "make_event", counted)
    telemetry.instrument(spans.provider, sample=0.0)
    weather_bot().run_nonstream(USER)
    member = BasicAgent(llm=ScriptedLLM(default="Agreed."), name="member")
    GroupChat([member], selection="round_robin", max_rounds=1, name="room").run_nonstream(USER)
    assert built == ["run_start", "run_start"]  # the bot's and the room's; the member's run built none
    ends = []
    weather_bot().run_nonstream(USER, callbacks=[ends.append])
    assert [e.kind for e in ends].count("llm_end") == 2 and [e.kind for e in ends][-1] == "run_end"
    assert spans.get_finished_spans() == ()


def test_the_spans_are_made_of_the_events_the_callbacks_get(spans):
    """OpenTelemetry is a listener of the run's events, as callbacks are: each model call's and tool call's span is
    the llm_end or tool_end event a callback of the run got, ending when the event happened, as long as it said."""
    got: list[events.Event] = []
    weather_bot().run_nonstream(USER, callbacks=[got.append])
    found = by_name(spans)
    check_tool_run(found)
    for kind, name in (("llm_end", "chat test-model"), ("tool_end", "execute_tool weather")):
        ends = [e for e in got if e.kind == kind]
        made = [(s.start_time, s.end_time) for s in found[name]]
        assert made == [(int(e.time * 1e9) - int(e.duration * 1e9), int(e.time * 1e9)) for e in ends]
