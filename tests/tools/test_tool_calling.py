"""The pieces under the tool loop: prepare_call, execute, the cache, run_batch."""

from __future__ import annotations

import threading
import time

import pytest

from chatagent.tools import tool
from chatagent.tools.calling import PreparedCall, ToolCache, call_key, execute, prepare_call, run_batch


@tool
def add(a: int, b: int = 1) -> int:
    """Add."""
    return a + b


TOOLS = {"add": add}


def test_prepare_then_execute():
    call = prepare_call(TOOLS, "add", '{"a": "2"}', call_id="c1")
    assert isinstance(call, PreparedCall) and call.args == {"a": 2, "b": 1}
    outcome = execute(call)
    assert (outcome.content, outcome.error, outcome.call_id, outcome.name) == ("3", None, "c1", "add")
    assert outcome.duration >= 0


def test_prepare_reports_problems_without_running():
    unknown = prepare_call(TOOLS, "sub", "{}")
    assert unknown.error == "unknown_tool" and "Did you mean" not in unknown.content
    bad = prepare_call(TOOLS, "add", '{"b": 2}')
    assert bad.error == "bad_arguments" and "'a' is required" in bad.content


def test_max_calls_counts_per_given_dict():
    limited = tool(add.fn, name="add", max_calls=2)
    counts: dict[str, int] = {}
    results = [prepare_call({"add": limited}, "add", {"a": i}, counts=counts) for i in range(3)]
    assert [isinstance(r, PreparedCall) for r in results] == [True, True, False]
    assert results[2].error == "max_calls" and counts == {"add": 2}


def test_cache_hits_and_keys():
    cached = tool(add.fn, name="add", cache=True)
    cache = ToolCache()
    first = prepare_call({"add": cached}, "add", '{"a": 1, "b": 2}', cache=cache)
    assert execute(first, cache).content == "3"
    again = prepare_call({"add": cached}, "add", '{"b": 2, "a": 1}', cache=cache)
    assert isinstance(again, PreparedCall)  # the cache is read when the call runs (after approval), not before
    hit = execute(again, cache)
    assert hit.cached and hit.content == "3"
    other = prepare_call({"add": cached}, "add", '{"a": 1, "b": 2}', cache=cache, kwargs={"session_id": "s2"})
    assert not execute(other, cache).cached  # another conversation's results are not read
    assert call_key("t", {"b": 1, "a": 2}) == call_key("t", {"a": 2, "b": 1})
    assert call_key("t", {"a": 1}, "s1") != call_key("t", {"a": 1}, "s2") != call_key("t", {"a": 1})
    assert call_key("t", {"x": object()}) is None


def test_cache_evicts_least_recently_used():
    cache = ToolCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert len(cache) == 2 and cache.get("a") == 1 and cache.get("c") == 3
    from chatagent.tools.calling import _MISSING

    assert cache.get("b") is _MISSING


def test_errors_in_tools_become_messages():
    @tool
    def boom() -> str:
        """Boom."""
        raise KeyError("x" * 1000)

    outcome = execute(prepare_call({"boom": boom}, "boom", "{}"))
    assert outcome.error == "exception" and outcome.content.startswith("Error: boom failed: KeyError: ")
    assert len(outcome.content) < 400


@pytest.mark.timeout(20)
def test_run_batch_order_and_our_own_bugs_propagate():
    def job(i: int, delay: float):
        def go():
            time.sleep(delay)
            if i == 2:
                raise RuntimeError("a bug in our code")
            return i

        return go

    wait = run_batch([job(0, 0.2), job(1, 0.0), job(2, 0.0)], max_workers=3)
    assert wait(0) == 0 and wait(1) == 1
    with pytest.raises(RuntimeError, match="a bug in our code"):
        wait(2)


@pytest.mark.timeout(20)
def test_timeout_abandons_the_thread_but_returns():
    gate = threading.Event()

    @tool(timeout=0.1)
    def stuck() -> str:
        """Stuck (120 s, released at the end: returning within the test's 20 s is the proof it was abandoned)."""
        gate.wait(120)
        return "finally"

    try:
        outcome = execute(prepare_call({"stuck": stuck}, "stuck", "{}"))
    finally:
        gate.set()
    assert outcome.error == "timeout"
