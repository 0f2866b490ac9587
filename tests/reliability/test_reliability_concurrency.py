"""Concurrency: 50 threads on one agent instance (ScriptedLLM and the loopback server), and the RAG cache
under concurrent first use. Every conversation gets its own answer, shared caches stay consistent, no
exception escapes, and no thread is left behind."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chatagent import Assistant, FnCallAgent, ScriptedLLM, get_chat_model, merge_delta, tool_call
from chatagent.llm.prepare import unmarked
from chatagent.rag import DocStore
from chatagent.schema import Message
from chatagent.tools.base import BaseTool
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(60)

THREADS = 50


class Square(BaseTool):
    """A cached tool that is slow enough for calls to overlap; counts how often it really ran."""

    name = "square"
    description = "The square of n."
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    cache = True

    def __init__(self, cfg: dict | None = None) -> None:
        super().__init__(cfg)
        self.ran: list[int] = []
        self._lock = threading.Lock()

    def call(self, params: str | dict, **kwargs: object) -> str:
        n = self.parse_params(params)["n"]
        time.sleep(0.005)
        with self._lock:
            self.ran.append(n)
        return str(n * n)


def number_of(text: str) -> int:
    return int(text.rsplit(" ", 1)[-1])


def scripted(messages: list[Message], functions: list[dict] | None) -> object:
    """The model: asks for the square of the number in the user's message, then reports the tool's result."""
    last = messages[-1]
    if last.role == "user":
        return [tool_call("square", {"n": number_of(last.text) % 7}), tool_call("square", {"n": 3})]
    user = next(m for m in reversed(messages) if m.role == "user")
    results = [unmarked(m.text) for m in messages if m.role == "function"]
    return f"conversation {number_of(user.text)}: {' '.join(results)}"


def expected(i: int) -> str:
    return f"conversation {i}: {(i % 7) ** 2} 9"


def run_all(bot: FnCallAgent, mode: str) -> list[object]:
    """THREADS conversations at once on `bot`; each result or the exception it raised."""
    barrier = threading.Barrier(THREADS)

    def one(i: int) -> object:
        barrier.wait()  # all start together
        msgs = [{"role": "user", "content": f"please square {i}"}]
        try:
            if mode == "nonstream":
                return bot.run_nonstream(msgs)
            out: list = []
            for rsp in bot.run(msgs, delta_stream=mode == "delta"):
                out = merge_delta(out, rsp) if mode == "delta" else rsp
            return out
        except Exception as e:  # reported by the test
            return e

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, range(THREADS)))


def assert_own_answers(results: list[object]) -> None:
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    for i, out in enumerate(results):
        assert out[-1]["content"] == expected(i), (i, out[-1])
        assert [m["role"] for m in out] == ["assistant", "assistant", "function", "function", "assistant"]


def chatagent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tool-")]


@pytest.mark.parametrize("mode", ["cumulative", "delta", "nonstream"])
def test_fifty_threads_on_one_agent_with_scripted_llm(mode: str) -> None:
    square = Square()
    bot = FnCallAgent(llm=ScriptedLLM(default=scripted), function_list=[square])
    results = run_all(bot, mode)
    assert_own_answers(results)
    # the shared tool cache holds only right answers, one per distinct argument
    assert sorted(bot._tool_cache._data.values()) == sorted(str(n * n) for n in {*range(7), 3})
    assert sorted(square.ran) == sorted({*range(7), 3})  # each distinct call ran once, however many asked at once
    deadline = time.monotonic() + 5
    while chatagent_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not chatagent_threads()  # the parallel-call workers are gone


def test_each_run_counts_only_its_own_usage() -> None:
    bot = FnCallAgent(llm=ScriptedLLM(default=scripted), function_list=[Square({"max_calls": 10})])
    barrier = threading.Barrier(20)

    def one(i: int) -> tuple[int, int]:
        barrier.wait()
        run = bot.run([{"role": "user", "content": f"please square {i}"}])
        for _ in run:
            pass
        return run.usage.calls, dict(run.context.tool_calls).get("square", 0)

    with ThreadPoolExecutor(20) as pool:
        assert set(pool.map(one, range(20))) == {(2, 2)}  # two model calls and two tool calls each, per run


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["cumulative", "nonstream"])
def test_fifty_threads_on_one_agent_over_http(openai_server: OpenAIServer, mode: str) -> None:
    def server_model(request: object) -> Reply:
        msgs = request.json["messages"]  # type: ignore[attr-defined]
        if msgs[-1]["role"] == "user":
            n = number_of(msgs[-1]["content"])
            return Reply(tool_calls=[("square", {"n": n % 7}), ("square", {"n": 3})], chunk_size=3)
        user = next(m for m in reversed(msgs) if m["role"] == "user")
        results = " ".join(unmarked(m["content"]) for m in msgs if m["role"] == "tool")
        return Reply(text=f"conversation {number_of(user['content'])}: {results}", chunk_size=3)

    openai_server.add(*[server_model] * (2 * THREADS))
    llm = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": {}})
    bot = FnCallAgent(llm=llm, function_list=[Square()])
    results = run_all(bot, mode)
    assert_own_answers(results)
    assert len(openai_server.chat_requests) == 2 * THREADS and openai_server.pending == 0
    assert all(r.outcome == "complete" for r in openai_server.chat_requests)


@pytest.mark.timeout(90)
def test_fifty_threads_first_use_of_one_file_through_one_assistant_parse_it_once(tmp_path: Path) -> None:
    manual = tmp_path / "manual.md"
    manual.write_text("# Manual\n\n" + "\n\n".join(f"Section {i}: setting {i} is {i * 3}." for i in range(200)))
    store = DocStore(tmp_path / "ws")

    def model(messages: list[Message], functions: list[dict] | None) -> str:
        system = messages[-1].text  # the excerpts come before the question
        n = number_of(system[system.index("My question:") :])
        return f"setting {n} is {n * 3}" if f"Section {n}: setting {n} is {n * 3}" in system else "not found"

    bot = Assistant(llm=ScriptedLLM(default=model), files=[str(manual)], rag_cfg={"store": store})
    barrier = threading.Barrier(THREADS)

    def one(i: int) -> object:
        barrier.wait()
        try:
            return bot.run_nonstream([{"role": "user", "content": f"What is setting {i}"}])[-1]["content"]
        except Exception as e:
            return e

    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(one, range(THREADS)))
    assert answers == [f"setting {i} is {i * 3}" for i in range(THREADS)]
    assert store.parses == 1  # one parse, not fifty
    assert len(store._indexes) == 1 and len(store._docs) == 1


class Flaky(BaseTool):
    """A slow cached tool whose first run fails."""

    name = "flaky"
    description = "Slow; fails the first time."
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    cache = True

    def __init__(self, cfg: dict | None = None, delay: float = 0.1, gate: threading.Event | None = None) -> None:
        super().__init__(cfg)
        self.delay = delay
        self.gate = gate  # given: a run waits for it (up to 120 s) instead of `delay`
        self.entered = threading.Event()  # set when a run starts
        self.runs = 0
        self._lock = threading.Lock()

    def call(self, params: str | dict, **kwargs: object) -> str:
        with self._lock:
            self.runs += 1
            first = self.runs == 1
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(120)
        else:
            time.sleep(self.delay)
        if first:
            raise RuntimeError("upstream hiccup")
        return "value for " + self.parse_params(params)["q"]


def test_concurrent_identical_cached_calls_run_the_tool_once_and_a_failure_is_not_shared() -> None:
    """Regression: 50 threads making the same cached call at once ran the tool up to 50 times."""
    from chatagent.tools.calling import PreparedCall, ToolCache, execute, prepare_call

    flaky = Flaky()
    tools, cache = {"flaky": flaky}, ToolCache()
    barrier = threading.Barrier(THREADS)

    def one(_: int) -> tuple[str | None, object]:
        call = prepare_call(tools, "flaky", {"q": "x"}, cache=cache)
        barrier.wait()
        outcome = execute(call, cache) if isinstance(call, PreparedCall) else call
        return outcome.error, outcome.content

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(one, range(THREADS)))
    assert flaky.runs == 2  # the first run failed (and its caller was told), the next one's value is shared
    assert sum(1 for error, _ in results if error == "exception") == 1
    assert [c for e, c in results if e is None] == ["value for x"] * (THREADS - 1)


def test_a_caller_waiting_for_a_cached_call_keeps_its_own_timeout() -> None:
    from chatagent.tools.calling import ToolCache, execute, prepare_call

    """The leader runs until the waiter has given up (up to 120 s, released then): the waiter's timeout is its own
    0.2 s, which ends its wait within the test's deadline, and the leader's value is cached for the next caller."""
    slow = Flaky({"timeout": 120}, gate=threading.Event())
    slow.runs = 1  # do not fail
    impatient = Flaky({"timeout": 0.2})
    cache = ToolCache()
    leader = prepare_call({"flaky": slow}, "flaky", {"q": "y"}, cache=cache)
    waiter = prepare_call({"flaky": impatient}, "flaky", {"q": "y"}, cache=cache)
    thread = threading.Thread(target=execute, args=(leader, cache))
    thread.start()
    try:
        assert slow.entered.wait(30)  # the leader's call is running: the waiter finds it in the cache
        outcome = execute(waiter, cache)
    finally:
        assert slow.gate is not None
        slow.gate.set()
    assert outcome.error == "timeout"
    assert impatient.runs == 0
    thread.join(30)
    assert not thread.is_alive()
    again = execute(prepare_call({"flaky": impatient}, "flaky", {"q": "y"}, cache=cache), cache)
    assert again.cached and again.content == "value for y"  # the leader's value, served from the cache
    assert impatient.runs == 0


def _react_model(messages: list[Message], functions: list[dict] | None) -> str:
    seen = [m.text for m in messages if "R:" in m.text]
    if seen:
        return f"Thought: I have it.\nFinal Answer: got {seen[-1].split('R:')[-1].split()[0]}"
    return f'Thought: look it up.\nAction: lookup\nAction Input: {{"query": "{messages[-1].text.split()[-1]}"}}'


def _nous_model(messages: list[Message], functions: list[dict] | None) -> str:
    text = messages[-1].text
    if "R:" in text:
        return "got " + text.split("R:")[-1].split()[0].strip("<>/\"'")
    call = {"name": "lookup", "arguments": {"query": text.split()[-1]}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look up
    """
    return "R:" + query


@pytest.mark.parametrize("kind", ["react", "prompt-based"])
def test_fifty_threads_on_one_text_protocol_agent(kind: str) -> None:
    from chatagent.agents.react_chat import ReActChat

    if kind == "react":
        bot: FnCallAgent = ReActChat(llm=ScriptedLLM(default=_react_model), function_list=[lookup], transcript=False)
    else:
        llm = ScriptedLLM(default=_nous_model, generate_cfg={"fncall_prompt_type": "nous"})
        bot = FnCallAgent(llm=llm, function_list=[lookup])
    barrier = threading.Barrier(THREADS)

    def one(i: int) -> object:
        barrier.wait()
        try:
            return bot.run_nonstream([{"role": "user", "content": f"find q{i}"}])[-1]["content"]
        except Exception as e:
            return e

    with ThreadPoolExecutor(THREADS) as pool:
        assert list(pool.map(one, range(THREADS))) == [f"got q{i}" for i in range(THREADS)]
