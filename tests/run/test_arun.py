"""arun(): the same answers as run() on an asyncio event loop, never blocking it.

Each concurrency property is proven by a handshake that can only complete if the claimed concurrency is real
(a barrier both sides must reach, an event only the other side can set), never by timing.
"""

from __future__ import annotations

import asyncio
import copy
import threading

import httpx
import pytest

from chatagent import BasicAgent, FnCallAgent, Message, ReActChat, Reply, Router, ScriptedLLM, merge_delta, tool_call
from chatagent.agents.group_chat import GroupChat
from chatagent.errors import RunDeadlineExceeded
from chatagent.tools import tool
from tests.support.openai_server import Reply as ServerReply

USER = [{"role": "user", "content": "hello"}]
DEADLINE = 20  # seconds any single wait in these tests may take before it counts as a failure


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


async def collect_arun(agent, messages, **kw):
    out = []
    async for rsp in agent.arun(messages, **kw):
        out.append(copy.deepcopy(rsp))
    return out


def llm_for(server, **cfg):
    return {"model": "m", "model_server": server.base_url, "api_key": "k", **cfg}


# ---- arun yields what run yields -------------------------------------------------------------------------


def script():
    return [
        Reply(text="Let me look.", reasoning="need weather", function_calls=[tool_call("weather", {"city": "Paris"})]),
        "It is sunny in Paris.",
    ]


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("delta", [False, True])
@pytest.mark.parametrize("as_messages", [False, True])
def test_arun_yields_exactly_what_run_yields(delta, as_messages):
    msgs = [Message("user", "weather?")] if as_messages else [{"role": "user", "content": "weather?"}]
    sync_bot = FnCallAgent(llm=ScriptedLLM(script()), function_list=[weather], name="w")
    async_bot = FnCallAgent(llm=ScriptedLLM(script()), function_list=[weather], name="w")
    expected = [copy.deepcopy(r) for r in sync_bot.run(msgs, delta_stream=delta)]
    got = run(collect_arun(async_bot, msgs, delta_stream=delta))
    assert got == expected
    assert len(got) > 3
    kind = Message if as_messages else dict
    assert all(isinstance(m, kind) for rsp in got for m in rsp)


def test_arun_over_http_matches_run_and_counts_usage(openai_server):
    for _ in range(2):
        openai_server.add(
            ServerReply(text="The answer is 42, said slowly.", usage={"prompt_tokens": 5, "completion_tokens": 7})
        )
    expected = [copy.deepcopy(r) for r in BasicAgent(llm=llm_for(openai_server)).run(USER)]

    async def go():
        r = BasicAgent(llm=llm_for(openai_server)).arun(USER)
        out = [copy.deepcopy(x) async for x in r]
        return out, r.usage

    got, usage = run(go())
    assert got == expected
    assert got[-1][0]["content"] == "The answer is 42, said slowly."
    assert (usage.prompt_tokens, usage.completion_tokens, usage.calls) == (5, 7, 1)
    assert openai_server.requests[1].json["stream"] is True


def test_arun_nonstream_equals_run_nonstream(openai_server):
    openai_server.add("Hi there", "Hi there")
    bot = BasicAgent(llm=llm_for(openai_server))
    assert run(bot.arun_nonstream(USER)) == bot.run_nonstream(USER)


# ---- the event loop stays free ---------------------------------------------------------------------------


def test_the_event_loop_runs_other_tasks_while_the_model_is_asked(openai_server):
    """The server answers only after a task on the same loop released it: impossible if arun blocked the loop."""
    released = threading.Event()

    def gated(request):
        if not released.wait(DEADLINE):
            return ServerReply(status=500, error={"message": "the loop never released the server"})
        return ServerReply(text="released")

    openai_server.add(gated)

    async def go():
        async def release():
            await asyncio.sleep(0)
            released.set()

        task = asyncio.create_task(release())
        out = await BasicAgent(llm=llm_for(openai_server, generate_cfg={"max_retries": 0})).arun_nonstream(USER)
        await task
        return out

    assert run(go())[-1]["content"] == "released"


def test_breaking_out_closes_the_http_stream_at_once(openai_server):
    openai_server.add(ServerReply(text="x" * 4000, chunk_size=1, interval=0.01))

    async def go():
        r = BasicAgent(llm=llm_for(openai_server)).arun(USER)
        async for _ in r:
            break
        await r.aclose()

    run(go())
    assert openai_server.wait_done(0, timeout=DEADLINE) == "aborted"


def test_cancelling_the_task_closes_the_http_stream(openai_server):
    openai_server.add(ServerReply(text="y" * 4000, chunk_size=1, interval=0.01))
    first = asyncio.Event

    async def go():
        got_one = first()

        async def consume():
            async for _ in BasicAgent(llm=llm_for(openai_server)).arun(USER):
                got_one.set()

        task = asyncio.create_task(consume())
        await got_one.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    assert openai_server.wait_done(0, timeout=DEADLINE) == "aborted"


def test_deadline_applies_in_arun(openai_server):
    openai_server.add(ServerReply(text="slow", stall_after=2, stall=30))

    async def go():
        with pytest.raises(RunDeadlineExceeded):
            async for _ in BasicAgent(llm=llm_for(openai_server, generate_cfg={"max_retries": 0})).arun(
                USER, deadline=0.5
            ):
                pass

    run(go())


# ---- tools on the caller's loop --------------------------------------------------------------------------


def test_async_tools_run_on_the_callers_loop_and_in_parallel():
    seen_loops = []
    barrier_box = {}

    @tool
    async def left(x: int) -> str:
        """Left half."""
        seen_loops.append(asyncio.get_running_loop())
        await asyncio.wait_for(barrier_box["b"].wait(), 5)  # only passes if `right` runs at the same time
        return f"left {x}"

    @tool
    async def right(x: int) -> str:
        """Right half."""
        seen_loops.append(asyncio.get_running_loop())
        await asyncio.wait_for(barrier_box["b"].wait(), 5)
        return f"right {x}"

    llm = ScriptedLLM([[tool_call("left", {"x": 1}), tool_call("right", {"x": 2})], "done"])
    bot = FnCallAgent(llm=llm, function_list=[left, right])

    async def go():
        barrier_box["b"] = asyncio.Barrier(2)
        out = await bot.arun_nonstream([{"role": "user", "content": "both"}])
        return out, asyncio.get_running_loop()

    out, loop = run(go())
    results = [m["content"] for m in out if m["role"] == "function"]
    assert results == ["left 1", "right 2"]  # in call order, and neither timed out on the barrier
    assert seen_loops == [loop, loop]


def test_a_shared_async_client_works_across_calls_in_arun_and_in_run(openai_server):
    """The issue's example: an httpx.AsyncClient kept by a tool fails on its second call if each call gets a
    fresh event loop."""
    holder = {}

    @tool
    async def models() -> str:
        """List the server's models."""
        if "client" not in holder:
            holder["client"] = httpx.AsyncClient()
        r = await holder["client"].get(openai_server.base_url + "/models")
        return str(r.status_code)

    def bot():
        llm = ScriptedLLM([tool_call("models"), tool_call("models"), "ok"])
        return FnCallAgent(llm=llm, function_list=[models])

    # run(): every call on the one background loop
    out = bot().run_nonstream(USER)
    assert [m["content"] for m in out if m["role"] == "function"] == ["200", "200"]
    holder.clear()

    async def go():
        return await bot().arun_nonstream(USER)

    out = run(go())
    assert [m["content"] for m in out if m["role"] == "function"] == ["200", "200"]


def test_sync_tools_run_in_worker_threads_under_arun():
    """The sync tool waits for an event that only a task on the loop sets: it must not run on the loop."""
    released = threading.Event()

    @tool
    def blocking() -> str:
        """Blocks until released."""
        return "released" if released.wait(DEADLINE) else "never released"

    bot = FnCallAgent(llm=ScriptedLLM([tool_call("blocking"), "done"]), function_list=[blocking])

    async def go():
        async def release():
            await asyncio.sleep(0)
            released.set()

        task = asyncio.create_task(release())
        out = await bot.arun_nonstream(USER)
        await task
        return out

    out = run(go())
    assert [m["content"] for m in out if m["role"] == "function"] == ["released"]


def test_an_async_tool_past_its_timeout_is_cancelled():
    state = {}

    @tool(timeout=0.2)
    async def forever() -> str:
        """Never returns."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "unreachable"

    bot = FnCallAgent(llm=ScriptedLLM([tool_call("forever"), "gave up"]), function_list=[forever])
    out = run(bot.arun_nonstream(USER))
    assert "did not finish within" in [m["content"] for m in out if m["role"] == "function"][0]
    assert state == {"cancelled": True}


# ---- every agent streams under arun ----------------------------------------------------------------------


def test_react_router_and_group_chat_give_the_same_answers_under_arun():
    def react():
        llm = ScriptedLLM(
            ['Thought: look it up\nAction: weather\nAction Input: {"city": "Oslo"}', "Thought: ok\nFinal Answer: cold"]
        )
        return ReActChat(llm=llm, function_list=[weather], transcript=False)

    def router():
        helper = BasicAgent(llm=ScriptedLLM(["I can help."]), name="helper", description="helps")
        return Router(llm=ScriptedLLM(["Call: helper"]), agents=[helper])

    def chat():
        a = BasicAgent(llm=ScriptedLLM(["Alice: hi Bob"]), name="Alice")
        b = BasicAgent(llm=ScriptedLLM(["hello Alice"]), name="Bob")
        return GroupChat([a, b], selection="round_robin", max_rounds=2)

    for make in (react, router, chat):
        expected = [copy.deepcopy(r) for r in make().run(USER)]
        got = run(collect_arun(make(), USER))
        assert got == expected, make.__name__
    assert expected[-1][-1]["content"] == "hello Alice"


# ---- Qwen-Agent-style agents -----------------------------------------------------------------------------


class QwenStyle(FnCallAgent):
    """A _run copied from Qwen-Agent's loop: whole response lists, a plain for loop over _call_llm."""

    def _run(self, messages, lang="en", **kwargs):
        response = []
        for _ in range(4):
            output = []
            for output in self._call_llm(messages=messages + response, functions=self.functions):
                if output:
                    yield response + output
            if not output:
                break
            response.extend(output)
            used = False
            for out in output:
                use_tool, name, args, _ = self._detect_tool(out)
                if use_tool:
                    result = self._call_tool(name, args, messages=messages)
                    fn_msg = Message("function", result, name=name, extra={"function_id": out.extra["function_id"]})
                    response.append(fn_msg)
                    yield response
                    used = True
            if not used:
                break


@pytest.mark.parametrize("delta", [False, True])
def test_a_qwen_style_run_works_in_run_and_arun(delta):
    def bot():
        return QwenStyle(llm=ScriptedLLM(script()), function_list=[weather])

    yields = [copy.deepcopy(r) for r in bot().run(USER, delta_stream=delta)]
    final = yields[-1] if not delta else merge_delta([], [f for d in yields for f in d])
    if delta:
        folded: list = []
        for d in yields:
            merge_delta(folded, d)
        final = folded
    assert [m["role"] for m in final] == ["assistant", "assistant", "function", "assistant"]
    assert final[2]["content"] == "sunny in Paris"
    assert final[-1]["content"] == "It is sunny in Paris."
    assert run(collect_arun(bot(), USER, delta_stream=delta)) == yields


def test_cancelling_arun_on_a_blocking_model_closes_its_stream_after_the_step_in_flight():
    from chatagent.llm.base import BaseChatModel

    closed = threading.Event()
    in_step = threading.Event()
    release = threading.Event()

    class Blocking(BaseChatModel):
        """A sync-only stream: arun reads it in a worker thread; its second step waits until released."""

        def _chat_stream(self, messages, functions, cfg, usage):
            try:
                yield [Message.unchecked("assistant", "first", None, None, None, {"index": 0})]
                in_step.set()
                release.wait(DEADLINE)
                yield [Message.unchecked("assistant", " second", None, None, None, {"index": 0})]
            finally:
                closed.set()

    bot = BasicAgent(llm=Blocking({"model": "blocking"}))

    async def main():
        async def consume():
            async for _ in bot.arun(USER, delta_stream=True):
                pass

        task = asyncio.create_task(consume())
        await asyncio.to_thread(in_step.wait, DEADLINE)
        task.cancel()  # while the worker thread is inside the stream's next step
        # give a wrong implementation time to close the stream under the running step (it fails at once); a
        # right one waits for the step, so the task is still going here whatever the machine's speed
        await asyncio.wait({task}, timeout=1.0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())  # before the fix: ValueError: generator already executing (close() raced the step in flight)
    assert closed.wait(DEADLINE)


def test_a_backend_whose_stream_is_a_plain_iterator_works_under_achat():
    """`_chat_stream` may return any iterator (its declared type): achat reads it in a worker thread and closes it
    only if it can be closed (a list iterator has no close(); that used to raise AttributeError at the end)."""
    from chatagent.llm.base import BaseChatModel

    class PlainIterator(BaseChatModel):
        def _chat_stream(self, messages, functions, cfg, usage):
            return iter([[Message.unchecked("assistant", "plain", None, None, None, {"index": 0})]])

    llm = PlainIterator({"model": "plain"})

    async def main():
        streamed = [rsp async for rsp in llm.achat(USER)]
        whole = await llm.achat(USER, stream=False)
        return streamed, whole

    streamed, whole = run(main())
    assert streamed == [[{"role": "assistant", "content": "plain"}]]
    assert whole == [{"role": "assistant", "content": "plain"}]


def test_a_backend_whose_async_stream_has_no_aclose_works_under_achat():
    """`_achat_stream` may return any async iterator: one without aclose() is read to its end, not failed on exit."""
    from chatagent.llm.base import BaseChatModel

    class Fragments:
        def __init__(self):
            self.left = [[Message.unchecked("assistant", "no aclose", None, None, None, {"index": 0})]]

        def __aiter__(self):
            return self

        async def __anext__(self):
            if not self.left:
                raise StopAsyncIteration
            return self.left.pop()

    class AsyncIteratorModel(BaseChatModel):
        def _achat_stream(self, messages, functions, cfg, usage):
            return Fragments()

    llm = AsyncIteratorModel({"model": "plain"})

    async def main():
        return [rsp async for rsp in llm.achat(USER)], await llm.achat(USER, stream=False)

    streamed, whole = run(main())
    assert streamed == [[{"role": "assistant", "content": "no aclose"}]]
    assert whole == [{"role": "assistant", "content": "no aclose"}]


COLD_FIRST_RUN = """
import asyncio, json, sys, threading

import chatagent.agents.basic  # what a program imports at its top: the model's backend is imported on first use
from chatagent import BasicAgent

BACKEND = "chatagent.llm.openai.chat"
assert BACKEND not in sys.modules
imported_on: list[str] = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == BACKEND:
            imported_on.append(threading.current_thread().name)
        return None


sys.meta_path.insert(0, Watch())


async def main() -> dict:
    loop_thread = threading.current_thread().name
    bot = BasicAgent(llm={"model": "m", "model_server": sys.argv[1], "api_key": "k"})
    async for rsp in bot.arun([{"role": "user", "content": "hi"}]):
        pass
    return {"loop": loop_thread, "imported_on": imported_on, "answer": rsp[-1]["content"]}


print(json.dumps(asyncio.run(main())))
"""


@pytest.mark.timeout(120)
def test_a_new_process_first_arun_builds_its_model_off_the_event_loop(openai_server, tmp_path) -> None:
    """Issue 43.20: a new agent's first `arun()` built its model on the event loop, importing the backend there
    (16 ms of the loop's CPU in a fresh process: every task on the loop waited); the build now runs in a worker
    thread before the first step."""
    import json
    import sys

    from tests.support import processes

    openai_server.add("pong")
    script = tmp_path / "cold.py"
    script.write_text(COLD_FIRST_RUN)
    out = processes.run([sys.executable, str(script), openai_server.base_url], capture_output=True, text=True,
                        timeout=100, cwd=str(tmp_path.parent))  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["answer"] == "pong"
    assert len(got["imported_on"]) == 1 and got["imported_on"] != [got["loop"]], got


def test_a_model_config_error_is_still_raised_by_the_run() -> None:
    """The build off the loop leaves a bad config's error to the run, which raises it as before."""
    bot = BasicAgent(llm={"model_type": "no-such-backend", "model": "m"})
    with pytest.raises(ValueError, match="unknown model_type 'no-such-backend'"):
        run(collect_arun(bot, USER))
    assert not bot.model_built
