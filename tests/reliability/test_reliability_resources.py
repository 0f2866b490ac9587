"""Resource bounds: the run deadline, early close (the HTTP stream is closed, no thread is left behind),
and memory that stays flat over 1,000 runs."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest

from chatagent import FnCallAgent, ScriptedLLM, get_chat_model, tool_call
from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.prepare import unmarked
from chatagent.schema import Message
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(60)

USER = [{"role": "user", "content": "look it up"}]


def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look up
    """
    return f"result for {query}"


def slow_lookup(query: str) -> str:
    """Look something up, slowly.

    Args:
        query: what to look up
    """
    time.sleep(0.4)
    return f"slow result for {query}"


def our_threads() -> list[threading.Thread]:
    """Threads started by chatagent or the SDKs (not the loopback server's handlers, not pytest's)."""
    skip = ("process_request_thread", "openai-server", "MainThread", "raw-fault-server")
    return [t for t in threading.enumerate() if not any(s in t.name for s in skip) and "pytest_timeout" not in t.name]


def wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return bool(condition())  # type: ignore[operator]


def oai(server: OpenAIServer) -> object:
    return get_chat_model({"model": "m", "model_server": server.base_url, "api_key": "k", "generate_cfg": {}})


# ---- the run deadline -----------------------------------------------------------------------------------------------


def test_deadline_stops_an_endless_tool_loop() -> None:
    def model(messages: list[Message], functions: list[dict] | None) -> object:
        time.sleep(0.02)
        return tool_call("lookup", {"query": f"q{len(messages)}"})

    bot = FnCallAgent(llm=ScriptedLLM(default=model), function_list=[lookup], max_llm_calls=10_000)
    start = time.monotonic()
    with pytest.raises(RunDeadlineExceeded):
        for _ in bot.run(USER, deadline=0.5):
            pass
    assert time.monotonic() - start >= 0.5  # ran until its deadline (endless otherwise: 10,000 calls of 20 ms)


def test_deadline_abandons_a_tool_that_runs_past_it() -> None:
    """The tool takes 120 s (released at the end): the run's 0.4 s deadline ends the run within the module's 60 s."""
    release = threading.Event()

    def stuck(query: str) -> str:
        """Never returns in time.

        Args:
            query: anything
        """
        release.wait(120)
        return "too late"

    bot = FnCallAgent(llm=ScriptedLLM([tool_call("stuck", {"query": "x"})]), function_list=[stuck])
    try:
        with pytest.raises(RunDeadlineExceeded):
            bot.run_nonstream(USER, deadline=0.4)
    finally:
        release.set()


@pytest.mark.timeout(30)
def test_deadline_over_http_across_model_and_tool_calls(openai_server: OpenAIServer) -> None:
    openai_server.add(
        Reply(tool_calls=[("slow_lookup", {"query": "a"})]),
        Reply(tool_calls=[("slow_lookup", {"query": "b"})]),
        Reply(text="never reached", delay=120),  # (released at the test's end)
    )
    bot = FnCallAgent(llm=oai(openai_server), function_list=[slow_lookup])
    with pytest.raises(RunDeadlineExceeded):  # the 1 s deadline, not the server's 120 s, within the test's 30 s
        bot.run_nonstream(USER, deadline=1.0)


# ---- closing early -------------------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "kind,delta",
    [("native", False), ("native", True), ("prompt-based", False), ("react", False)],
    ids=["native-cumulative", "native-delta", "prompt-based", "react"],
)
def test_closing_a_run_mid_stream_closes_the_http_stream_and_leaves_no_thread(
    openai_server: OpenAIServer, kind: str, delta: bool
) -> None:
    from chatagent.agents.react_chat import ReActChat

    openai_server.add(Reply(text="z" * 2000, chunk_size=1, interval=0.002))
    llm = oai(openai_server)
    if kind == "prompt-based":
        llm.generate_cfg["fncall_prompt_type"] = "nous"  # type: ignore[attr-defined]
    bot = (ReActChat if kind == "react" else FnCallAgent)(llm=llm, function_list=[lookup])
    before = set(our_threads())
    run = bot.run(USER, delta_stream=delta)
    next(run)
    next(run)
    run.close()
    assert openai_server.wait_done(0, timeout=5) == "aborted"  # the server saw the connection go
    assert wait_for(lambda: set(our_threads()) <= before), our_threads()


@pytest.mark.timeout(30)
def test_dropping_a_run_without_closing_it_closes_the_http_stream(openai_server: OpenAIServer) -> None:
    openai_server.add(Reply(text="z" * 2000, chunk_size=1, interval=0.002))
    run = FnCallAgent(llm=oai(openai_server), function_list=[lookup]).run(USER)
    next(run)
    del run
    gc.collect()
    assert openai_server.wait_done(0, timeout=5) == "aborted"


@pytest.mark.timeout(30)
def test_closing_a_run_during_parallel_tools_leaves_no_thread_once_they_finish(openai_server: OpenAIServer) -> None:
    calls = [(name, {"query": str(i)}) for i, name in enumerate(["lookup", "slow_lookup", "slow_lookup"])]
    openai_server.add(Reply(tool_calls=calls), "unused")
    bot = FnCallAgent(llm=oai(openai_server), function_list=[lookup, slow_lookup])
    before = set(our_threads())
    run = bot.run(USER)
    for rsp in run:
        if rsp[-1]["role"] == "function":  # the first result is in: stop while the slow ones still run
            break
    run.close()
    assert len(openai_server.chat_requests) == 1  # the model was not asked again
    assert wait_for(lambda: set(our_threads()) <= before, timeout=3), our_threads()


# ---- memory over many runs --------------------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_stays_flat_over_1000_runs_with_scripted_llm() -> None:
    def model(messages: list[Message], functions: list[dict] | None) -> object:
        last = messages[-1]
        return tool_call("lookup", {"query": last.text}) if last.role == "user" else f"done: {unmarked(last.text)}"

    llm = ScriptedLLM(default=model)
    bot = FnCallAgent(llm=llm, function_list=[lookup])

    def once(i: int) -> None:
        rsp = list(bot.run([{"role": "user", "content": f"question {i}"}]))[-1]
        assert rsp[-1]["content"] == f"done: result for question {i}"
        llm.calls.clear()  # the test model records every call by design

    for i in range(100):  # warm up caches and allocator pools
        once(i)
    gc.collect()
    start = rss_bytes()
    for i in range(1000):
        once(i)
    gc.collect()
    growth = rss_bytes() - start
    print(f"RSS growth over 1000 scripted runs: {growth / 2**20:.2f} MB")
    assert growth < 30 * 2**20


@pytest.mark.timeout(60)
def test_memory_stays_flat_over_300_runs_over_http(openai_server: OpenAIServer) -> None:
    def server_model(request: object) -> Reply:
        last = request.json["messages"][-1]  # type: ignore[attr-defined]
        if last["role"] == "user":
            return Reply(tool_calls=[("lookup", {"query": last["content"]})])
        return Reply(text=f"done: {unmarked(last['content'])}")

    bot = FnCallAgent(llm=oai(openai_server), function_list=[lookup])

    def once(i: int) -> None:
        openai_server.add(server_model, server_model)
        out = bot.run_nonstream([{"role": "user", "content": f"question {i}"}])
        assert out[-1]["content"] == f"done: result for question {i}"
        openai_server.requests.clear()

    for i in range(30):
        once(i)
    gc.collect()
    start = rss_bytes()
    threads = len(threading.enumerate())
    for i in range(300):
        once(i)
    gc.collect()
    growth = rss_bytes() - start
    print(f"RSS growth over 300 runs over HTTP: {growth / 2**20:.2f} MB")
    assert growth < 30 * 2**20
    assert len(threading.enumerate()) <= threads + 2  # connections are reused, not one thread per run
