"""The run machinery's rules of docs/architecture.md that are about its code's shape: one hand-written pump in run/
besides the drivers (`run.stage.relay`: every other layer is a `Stage`), no function in run/ above a McCabe
complexity of 15 but the async driver, the sync/async seam written once (no twin pairs in run/start.py and
llm/routing.py, few in the package), `Runnable` as the whole contract (at most one `getattr(agent, ...)` in run/),
and few casts. The measures are tests/support/code_measures.py's; each rule's checker is shown a small bad example.
(The reading path's budget is tests/core/test_reading_path.py's.)
"""

from __future__ import annotations

from pathlib import Path

from tests.support.code_measures import (
    DRIVERS,
    PACKAGE,
    RUN,
    agent_getattrs,
    calls_named,
    complexities,
    method_calls,
    pumps,
    py_files,
    twin_pairs,
)

MAX_COMPLEXITY = 15
COMPLEX_ALLOWED = {"driver.py:adrive"}  # the async driver: every request's kind written out, one layer less a chunk
MAX_TWIN_PAIRS = 43  # in chatagent/: 61 before the Stage step, 55 after it, 66 after the merges (the native
# backends' HTTP client, evaluate/aevaluate, CrewAI's kickoff_async pairs), 53 with one HTTP transport
# (llm/http_transport.py) and the Reading pair (llm/request.py), 50 with first_answer (a plan's fallback and
# FallbackModel's models in turn) and a whole reply placed once; 43 with plans (llm/pumps.py: the retries, the
# response cache, streams tried in turn, chat()'s dicts and a local model's constrained tools written once, carried
# out by played/aplayed) and MCP's resources and prompts asked once (no async copies); the issue asked for 45
SEAM_FILES = ("run/start.py", "llm/routing.py")
MAX_AGENT_GETATTRS = 1  # run/agent_tool.py: an Agent's description, which a Runnable need not have
MAX_CASTS = 11  # in run/: 25 before the Stage step, 12 after it, 17 after the merges, 11 typed since


def test_one_hand_written_pump_in_run_besides_the_drivers() -> None:
    found = {k for k in pumps(py_files(RUN)) if k.split(":")[1] not in DRIVERS}
    assert found == {"stage.py:relay"}, "a layer around an agent's loop is a run.stage.Stage, relayed by relay()"


def test_no_function_in_run_is_too_complex() -> None:
    found = {k: n for k, n in complexities(py_files(RUN)).items() if n > MAX_COMPLEXITY and k not in COMPLEX_ALLOWED}
    assert not found, "split these by job"


def test_the_sync_async_seam_is_written_once() -> None:
    assert not twin_pairs([PACKAGE / f for f in SEAM_FILES]), "take the Driving pair (run.start) or a ReplyPlan"
    found = twin_pairs(py_files(PACKAGE))
    assert len(found) <= MAX_TWIN_PAIRS, found


def test_runnable_is_the_whole_contract_and_casts_are_few() -> None:
    assert len(agent_getattrs(py_files(RUN))) <= MAX_AGENT_GETATTRS, "add what run/ needs to run.protocol.Runnable"
    assert len(calls_named(py_files(RUN), "cast")) <= MAX_CASTS


TRANSPORT_CALLS = frozenset({"send", "iter_bytes", "aiter_bytes"})


def test_every_http_backend_sends_through_the_one_transport() -> None:
    """A request is sent and its stream read in llm/http_transport.py only: a backend writes its protocol."""
    found = method_calls(py_files(PACKAGE / "llm"), TRANSPORT_CALLS)
    assert found and {k.split(":")[0] for k in found} == {"http_transport.py"}, found


def test_the_checkers_see_what_they_count(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import cast\n\n"
        "def pump(gen):\n    value = None\n    while True:\n        value = yield gen.send(value)\n\n"
        "def forwards(gen):\n    return (yield from gen)\n\n"
        "def stream(x):\n    return x\n\n"
        "def astream(x):\n    return x\n\n"
        "class C:\n    def _call(self):\n        pass\n\n    async def _acall(self):\n        pass\n\n"
        "    def run_sync(self):\n        pass\n\n"
        "def tangled(agent, a, b, c):\n"
        "    name = getattr(agent, 'name', None)\n"
        "    for x in a:\n        if x:\n            while b:\n                try:\n                    pass\n"
        "                except ValueError:\n                    pass\n    elif_ = cast(int, c)\n"
        "    if a:\n        pass\n    elif b:\n        pass\n"
        "    match c:\n        case 1:\n            pass\n        case _:\n            pass\n"
        "    def inner():\n        if a:\n            pass\n"
        "    return name, elif_, inner\n"
    )
    assert set(pumps([bad])) == {"bad.py:pump"}  # `yield from` is the language's pump, not a hand-written one
    assert sorted(twin_pairs([bad])) == ["bad.py:_call/_acall", "bad.py:stream/astream"]
    found = complexities([bad])
    assert found["bad.py:tangled"] == 9 and found["bad.py:tangled.inner"] == 2 and found["bad.py:stream"] == 1
    assert agent_getattrs([bad]) == ["bad.py:28"] and calls_named([bad], "cast") == ["bad.py:36"]
    assert method_calls([bad], TRANSPORT_CALLS) == ["bad.py:6"]
