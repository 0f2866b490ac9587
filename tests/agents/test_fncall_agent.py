"""FnCallAgent: the tool loop with ScriptedLLM (real tools, real threads; only the model is scripted)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from chatagent import FnCallAgent, Message, Plugin, Reply, ScriptedLLM, merge_delta, tool, tool_call
from chatagent.agent import Agent
from chatagent.llm.base import Usage
from chatagent.llm.prepare import unmarked, untrusted
from chatagent.run.events import Callbacks, Event
from chatagent.utils.tokens import count_tokens

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        unit: celsius or fahrenheit.
    """
    return f"{city}: 21 {unit}"


def _roles(rsp):
    return [(m["role"], m.get("name"), (m.get("function_call") or {}).get("name")) for m in rsp]


def test_single_call_then_answer():
    llm = ScriptedLLM([tool_call("get_weather", {"city": "Paris"}), "It is 21 degrees in Paris."])
    bot = FnCallAgent(llm=llm, function_list=[get_weather])
    rsp = bot.run_nonstream(USER)
    assert _roles(rsp) == [
        ("assistant", None, "get_weather"),
        ("function", "get_weather", None),
        ("assistant", None, None),
    ]
    assert rsp[1]["content"] == "Paris: 21 celsius"
    assert rsp[1]["extra"]["function_id"] == rsp[0]["extra"]["function_id"]
    assert rsp[2]["content"] == "It is 21 degrees in Paris."
    # the model saw the tool schema, then the call and its result
    assert llm.calls[0].functions[0]["name"] == "get_weather"
    second = llm.calls[1].messages
    assert [m.role for m in second] == ["user", "assistant", "function"]
    assert second[-1].content == untrusted("Paris: 21 celsius", "tool get_weather")  # marked as data for the model
    llm.assert_complete()
    assert USER == [{"role": "user", "content": "What is the weather in Paris?"}]  # input untouched


def test_each_model_call_gets_the_tool_results_marked_once_however_a_hook_changed_its_input():
    # the marked copy of a result is reused from call to call (marked once per run), but never one a hook changed
    class Tamper(Plugin):
        def before_model(self, agent, call):
            for m in call.messages:
                if m.role == "function":
                    m.content = "seen: " + m.content  # in place, on the model call's own input
                    m.extra["seen"] = m.extra.get("seen", 0) + 1

    script = [tool_call("get_weather", {"city": "Paris"}), tool_call("get_weather", {"city": "Oslo"}), "Done."]
    llm = ScriptedLLM(script)
    rsp = FnCallAgent(llm=llm, function_list=[get_weather], plugins=[Tamper()]).run_nonstream(USER)
    paris = untrusted("Paris: 21 celsius", "tool get_weather")
    assert [m.content for m in llm.calls[1].messages if m.role == "function"] == ["seen: " + paris]
    third = [m for m in llm.calls[2].messages if m.role == "function"]
    assert [m.content for m in third] == [
        "seen: " + paris,
        "seen: " + untrusted("Oslo: 21 celsius", "tool get_weather"),
    ]
    assert [m.extra["seen"] for m in third] == [1, 1]
    assert [m["content"] for m in rsp if m["role"] == "function"] == ["Paris: 21 celsius", "Oslo: 21 celsius"]
    assert all("seen" not in m["extra"] for m in rsp if m["role"] == "function")


def test_streaming_modes_agree():
    script = [Reply(text="Let me check.", function_calls=[tool_call("get_weather", {"city": "Oslo"})]), "Cold."]
    final = FnCallAgent(llm=ScriptedLLM(list(script)), function_list=[get_weather]).run_nonstream(USER)
    cumulative = list(FnCallAgent(llm=ScriptedLLM(list(script)), function_list=[get_weather]).run(USER))
    for a, b in zip(cumulative, cumulative[1:], strict=False):
        assert len(b) >= len(a)
    merged: list = []
    for delta in FnCallAgent(llm=ScriptedLLM(list(script)), function_list=[get_weather]).run(USER, delta_stream=True):
        merge_delta(merged, delta)
    assert cumulative[-1] == final
    assert merged == final
    assert final[0]["content"] == "Let me check." and final[2]["content"] == "Oslo: 21 celsius"


@pytest.mark.timeout(30)
def test_parallel_calls_run_concurrently_and_keep_order():
    # all three calls must be inside the tool at once to pass the barrier: run one after another, they
    # would each wait for the others and fail with BrokenBarrierError
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def slow(name: str, seconds: float) -> str:
        """Wait for the other calls, then answer (the slowest first, to prove results keep call order)."""
        barrier.wait()
        time.sleep(seconds)
        return f"{name} done"

    calls = [tool_call("slow", {"name": n, "seconds": s}) for n, s in (("a", 0.3), ("b", 0.1), ("c", 0.0))]
    llm = ScriptedLLM([calls, "All done."])
    bot = FnCallAgent(llm=llm, function_list=[slow])
    rsp = bot.run_nonstream(USER)
    assert not barrier.broken
    assert [m["content"] for m in rsp if m["role"] == "function"] == ["a done", "b done", "c done"]
    ids = [m["extra"]["function_id"] for m in rsp if m.get("function_call")]
    assert [m["extra"]["function_id"] for m in rsp if m["role"] == "function"] == ids


@pytest.mark.timeout(30)
def test_parallel_bound():
    active = []
    peak = []
    lock = threading.Lock()

    @tool
    def work(n: int) -> int:
        """Work."""
        with lock:
            active.append(n)
            peak.append(len(active))
        time.sleep(0.05)
        with lock:
            active.remove(n)
        return n

    llm = ScriptedLLM([[tool_call("work", {"n": i}) for i in range(8)], "ok"])
    rsp = FnCallAgent(llm=llm, function_list=[work], max_parallel_tools=2).run_nonstream(USER)
    assert max(peak) <= 2
    assert [m["content"] for m in rsp if m["role"] == "function"] == [str(i) for i in range(8)]


def test_unknown_tool_is_told_to_the_model(caplog):
    llm = ScriptedLLM([tool_call("get_wether", {"city": "Paris"}), tool_call("get_weather", {"city": "Paris"}), "ok"])
    rsp = FnCallAgent(llm=llm, function_list=[get_weather]).run_nonstream(USER)
    err = rsp[1]["content"]
    assert err.startswith("Error: there is no tool named 'get_wether'. Did you mean 'get_weather'?")
    assert "Available tools: get_weather." in err
    assert rsp[3]["content"] == "Paris: 21 celsius"
    assert "unknown tool" in caplog.text


def test_bad_arguments_repaired():
    llm = ScriptedLLM([tool_call("get_weather", "```json\n{'city': 'Rome', 'unit': 'fahrenheit',}\n```"), "ok"])
    rsp = FnCallAgent(llm=llm, function_list=[get_weather]).run_nonstream(USER)
    assert rsp[1]["content"] == "Rome: 21 fahrenheit"


def test_bad_arguments_rejected_readably():
    llm = ScriptedLLM([tool_call("get_weather", '{"town": "Rome"}'), tool_call("get_weather", "not json"), "ok"])
    rsp = FnCallAgent(llm=llm, function_list=[get_weather]).run_nonstream(USER)
    assert rsp[1]["content"] == (
        "Error: invalid arguments for get_weather: 'city' is required. Call get_weather again with corrected arguments."
    )
    assert rsp[3]["content"].startswith("Error: invalid arguments for get_weather: arguments are not valid JSON")
    assert all("Traceback" not in m["content"] for m in rsp)


def test_tool_that_raises(caplog):
    @tool
    def explode(x: int) -> str:
        """Fail."""
        raise RuntimeError(f"database offline (x={x})")

    llm = ScriptedLLM([tool_call("explode", {"x": 1}), "Sorry, the database is offline."])
    with caplog.at_level(logging.WARNING, logger="chatagent.tools"):
        rsp = FnCallAgent(llm=llm, function_list=[explode]).run_nonstream(USER)
    assert rsp[1]["content"] == "Error: explode failed: RuntimeError: database offline (x=1)"
    assert "Traceback" in caplog.text and "database offline" in caplog.text  # the traceback is logged
    assert rsp[2]["content"] == "Sorry, the database is offline."


def test_budget_exhaustion_asks_for_a_final_answer():
    llm = ScriptedLLM([tool_call("get_weather", {"city": c}) for c in ("A", "B", "C")] + ["Best I can say: mild."])
    bot = FnCallAgent(llm=llm, function_list=[get_weather], max_llm_calls=3)
    rsp = bot.run_nonstream(USER)
    assert len(llm.calls) == 4
    assert llm.calls[3].functions is None  # the last call offers no tools
    assert "used all the tool calls" in llm.calls[3].messages[-1].content
    assert rsp[-1]["content"] == "Best I can say: mild."
    assert rsp[-1]["extra"]["stop_reason"] == "max_llm_calls"
    llm.assert_complete()


def test_budget_exhaustion_with_empty_final_answer_says_why():
    llm = ScriptedLLM([tool_call("get_weather", {"city": "A"}), ""])
    rsp = FnCallAgent(llm=llm, function_list=[get_weather], max_llm_calls=1).run_nonstream(USER)
    assert rsp[-1]["content"] == "Stopped after 1 model calls without reaching a final answer."
    assert rsp[-1]["extra"]["stop_reason"] == "max_llm_calls"


def test_cache_across_runs():
    runs = []

    @tool(cache=True)
    def lookup(key: str) -> str:
        """Look up."""
        runs.append(key)
        return key.upper()

    llm = ScriptedLLM(
        [tool_call("lookup", '{"key": "a"}'), "1", tool_call("lookup", '{ "key" : "a" }'), "2"]
        + [tool_call("lookup", {"key": "b"}), "3"]
    )
    bot = FnCallAgent(llm=llm, function_list=[lookup])
    outs = [bot.run_nonstream(USER)[1]["content"] for _ in range(3)]
    assert outs == ["A", "A", "B"]
    assert runs == ["a", "b"]


def test_max_calls_per_run():
    @tool(max_calls=1)
    def once(q: str) -> str:
        """Once."""
        return f"got {q}"

    llm = ScriptedLLM([tool_call("once", {"q": "x"}), tool_call("once", {"q": "y"}), "ok"] * 2)
    bot = FnCallAgent(llm=llm, function_list=[once])
    for _ in range(2):  # the limit is per run
        rsp = bot.run_nonstream(USER)
        assert rsp[1]["content"] == "got x"
        assert rsp[3]["content"].startswith("Error: once may be called at most 1 time(s)")


def test_return_direct():
    @tool(return_direct=True)
    def final_report(topic: str) -> str:
        """Write the report."""
        return f"Report on {topic}."

    llm = ScriptedLLM([tool_call("final_report", {"topic": "tides"})])
    rsp = FnCallAgent(llm=llm, function_list=[final_report]).run_nonstream(USER)
    assert rsp[-1]["role"] == "assistant" and rsp[-1]["content"] == "Report on tides."
    assert rsp[-1]["extra"]["stop_reason"] == "return_direct"
    assert len(llm.calls) == 1


def test_repeated_call_reported_as_loop():
    runs = []

    @tool
    def ping(host: str) -> str:
        """Ping."""
        runs.append(host)
        return "timeout"

    same = [tool_call("ping", {"host": "h"}), tool_call("ping", '{"host":"h"}'), tool_call("ping", {"host": "h"})]
    llm = ScriptedLLM(same + ["The host is down."])
    rsp = FnCallAgent(llm=llm, function_list=[ping]).run_nonstream(USER)
    assert runs == ["h", "h"]
    assert rsp[5]["content"].startswith("Error: you called ping with the same arguments 3 times in a row")
    assert rsp[-1]["content"] == "The host is down."


@pytest.mark.timeout(60)
def test_tool_timeout_does_not_stop_the_run():
    """The tool hangs for 120 s (released at the end): the run answering at all, within the test's deadline, is
    the proof that it did not wait for the tool past its 0.2 s."""
    release = threading.Event()

    @tool(timeout=0.2)
    def hang(x: int) -> str:
        """Hang."""
        release.wait(120)
        return "late"

    llm = ScriptedLLM([tool_call("hang", {"x": 1}), "It took too long."])
    try:
        rsp = FnCallAgent(llm=llm, function_list=[hang]).run_nonstream(USER)
    finally:
        release.set()
    assert rsp[1]["content"].startswith("Error: hang did not finish within 0.2 seconds")
    assert rsp[2]["content"] == "It took too long."


def test_timeout_from_a_cfg_dict():
    from chatagent.tools import TOOL_REGISTRY, register_tool

    saved = dict(TOOL_REGISTRY)
    try:

        @register_tool("nap_test")
        def nap(seconds: float) -> str:
            """Nap."""
            time.sleep(seconds)
            return "rested"

        llm = ScriptedLLM([tool_call("nap_test", {"seconds": 1.5}), "ok"])
        bot = FnCallAgent(llm=llm, function_list=[{"name": "nap_test", "timeout": 0.1}])
        assert "did not finish within 0.1 seconds" in bot.run_nonstream(USER)[1]["content"]
    finally:
        TOOL_REGISTRY.clear()
        TOOL_REGISTRY.update(saved)


def test_events_in_order_with_usage_and_durations():
    log: list[Event] = []

    class Recorder(Callbacks):
        def on_tool_end(self, event):
            log.append(event)

    llm = ScriptedLLM([[tool_call("get_weather", {"city": "A"}), tool_call("nope", {})], "Done."])
    bot = FnCallAgent(llm=llm, function_list=[get_weather], callbacks=[log.append], name="bot")
    run = bot.run(USER, callbacks=[Recorder()])
    list(run)
    kinds = [(e.kind, e.tool) for e in log]
    assert kinds == [
        ("run_start", None),
        ("llm_start", None),
        ("llm_end", None),
        ("tool_start", "get_weather"),
        ("tool_start", "nope"),
        ("tool_end", "get_weather"),
        ("tool_end", "get_weather"),  # the Recorder's copy
        ("tool_end", "nope"),
        ("tool_end", "nope"),
        ("llm_start", None),
        ("llm_end", None),
        ("run_end", None),
    ]
    ends = [e for e in log if e.kind == "tool_end"]
    assert ends[0].error is None and ends[0].result == "A: 21 celsius" and ends[0].duration >= 0
    assert ends[2].error.startswith("Error: there is no tool named 'nope'")
    llm_ends = [e for e in log if e.kind == "llm_end"]
    assert all(e.usage.prompt_tokens > 0 and e.duration >= 0 for e in llm_ends)
    run_end = log[-1]
    assert run_end.usage is run.usage and run_end.error is None and run_end.agent == "bot"
    assert run.usage.prompt_tokens == sum(e.usage.prompt_tokens for e in llm_ends)
    assert run.usage.calls == 2


def test_callback_errors_do_not_break_the_run(caplog):
    def broken(event):
        raise ValueError("oops")

    llm = ScriptedLLM(["hi"])
    assert FnCallAgent(llm=llm, callbacks=[broken]).run_nonstream(USER)[-1]["content"] == "hi"
    assert "callback" in caplog.text and "oops" in caplog.text


def test_usage_summed_over_the_tool_loop():
    llm = ScriptedLLM([tool_call("get_weather", {"city": "A"}), tool_call("get_weather", {"city": "B"}), "Done."])
    run = FnCallAgent(llm=llm, function_list=[get_weather]).run(USER)
    list(run)
    assert run.usage.calls == 3
    expected = Usage()
    for call in llm.calls:  # ScriptedLLM counts the prompt as the text of the messages it got
        expected.add(sum(count_tokens(m.text) for m in call.messages), 0)
    assert run.usage.prompt_tokens == expected.prompt_tokens > 0
    assert run.usage.completion_tokens == count_tokens("Done.")


def test_run_end_event_on_error():
    from chatagent.errors import ModelServiceError

    log: list[Event] = []
    llm = ScriptedLLM([ModelServiceError(400, "bad request")])
    with pytest.raises(ModelServiceError):
        FnCallAgent(llm=llm, callbacks=[log.append]).run_nonstream(USER)
    assert [e.kind for e in log] == ["run_start", "llm_start", "llm_end", "run_end"]
    assert log[2].error == "ModelServiceError: 400: bad request" and log[3].error.startswith("ModelServiceError")


@pytest.mark.timeout(60)
def test_one_agent_many_threads():
    """The same agent serves many threads at once; each run sees only its own messages and results."""

    def model(messages, functions):
        last = messages[-1]
        if last.role == "user":
            return tool_call("echo", {"text": last.text})
        return f"final: {unmarked(last.text)}"  # the result, without its untrusted-data markers

    @tool(cache=True)
    def echo(text: str) -> str:
        """Echo."""
        time.sleep(0.001)
        return text[::-1]

    bot = FnCallAgent(llm=ScriptedLLM([], default=model), function_list=[echo])
    errors: list[str] = []

    def worker(k: int) -> None:
        for j in range(10):
            text = f"msg-{k}-{j}"
            rsp = bot.run_nonstream([{"role": "user", "content": text}])
            if rsp[-1]["content"] != f"final: {text[::-1]}" or len(rsp) != 3:
                errors.append(f"{text}: {rsp}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(50)
    assert not errors, errors[:3]


def test_call_tool_helper_for_other_agents():
    """Agent._call_tool gives other agents (ReAct and the like) the same checks, one call at a time."""

    @tool(max_calls=1)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    class Manual(Agent):
        def _run(self, messages, lang="en", **kwargs):
            first = self._call_tool("add", '{"a": 1, "b": "2"}')
            second = self._call_tool("add", {"a": 1, "b": 2})
            missing = self._call_tool("sub", "{}")
            yield [Message("assistant", f"{first}|{second}|{missing}", extra={"index": 0})]

    log: list[Event] = []
    rsp = Manual(function_list=[add], llm=ScriptedLLM([]), callbacks=[log.append]).run_nonstream(USER)
    first, second, missing = rsp[0]["content"].split("|")
    assert first == "3"
    assert second.startswith("Error: add may be called at most 1 time(s)")
    assert missing.startswith("Error: there is no tool named 'sub'")
    assert [e.kind for e in log if e.kind.startswith("tool")] == ["tool_start", "tool_end"] * 3


def test_detect_tool_helper():
    bot = FnCallAgent(llm=ScriptedLLM([]))
    msg = Message("assistant", "hm", function_call={"name": "f", "arguments": "{}"})
    assert bot._detect_tool(msg) == (True, "f", "{}", "hm")
    assert bot._detect_tool(Message("assistant", "plain")) == (False, "", "", "plain")


def test_tools_get_the_conversation():
    seen = {}

    from chatagent.tools import BaseTool

    class Inspect(BaseTool):
        name = "inspect"

        def call(self, params, **kwargs):
            seen.update(kwargs)
            return "ok"

    llm = ScriptedLLM([tool_call("inspect", {}), "done"])
    FnCallAgent(llm=llm, function_list=[Inspect()]).run_nonstream(USER)
    assert seen["lang"] == "en" and seen["messages"][0].content == USER[0]["content"]


def test_bad_max_llm_calls():
    with pytest.raises(ValueError, match="max_llm_calls"):
        FnCallAgent(llm=ScriptedLLM([]), max_llm_calls=0)


@pytest.mark.timeout(60)
def test_run_deadline_bounds_a_hanging_tool():
    """The tool hangs for 120 s (released at the end): the run raising within the test's deadline proves that its
    own 0.3 s deadline, not the tool, ended it."""
    from chatagent.errors import RunDeadlineExceeded

    release = threading.Event()

    @tool
    def hang(x: int) -> str:
        """Hang (no timeout of its own)."""
        release.wait(120)
        return "late"

    llm = ScriptedLLM([tool_call("hang", {"x": 1}), "never reached"])
    try:
        with pytest.raises(RunDeadlineExceeded):
            FnCallAgent(llm=llm, function_list=[hang]).run_nonstream(USER, deadline=0.3)
    finally:
        release.set()
