"""The typed event stream gives each event as it happens (issue 39): a tool's start reaches the consumer while the
tool still runs, under run() and arun(), and the events a tool's own thread makes come out while it runs, the queue
bounded, their order kept; a retried model stream that starts a call's arguments again lets the consumer rebuild
exactly the final arguments (a restart event, or only what goes past what was sent)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from chatagent import Agent, FnCallAgent, Message, ScriptedLLM, tool, tool_call
from chatagent.run import event_stream
from chatagent.run.agent_tool import AgentTool
from chatagent.run.context import current_run
from chatagent.run.events import PROGRESS, tell
from tests.support.openai_server import Reply as OpenAIReply

USER = [{"role": "user", "content": "Go."}]
WAIT = 30  # seconds: a deadline, never reached when the stream gives events as they happen


def _blocking_bot(seen: threading.Event) -> FnCallAgent:
    @tool
    def slow(city: str) -> str:
        """Waits until the consumer saw the call start."""
        if not seen.wait(WAIT):
            raise TimeoutError("tool_start did not reach the consumer while the tool ran")
        return f"done for {city}"

    llm = ScriptedLLM([[tool_call("slow", {"city": "Oslo"})], "All done."])
    return FnCallAgent(llm=llm, function_list=[slow], name="bot")


def _shape(types: list[str], results: list[Any]) -> None:
    assert types.index("model_end") < types.index("tool_start") < types.index("tool_end")
    assert results == ["done for Oslo"]  # the tool did not time out: its start came out while it waited


def test_tool_start_reaches_run_events_while_the_tool_runs() -> None:
    seen = threading.Event()
    types, results = [], []
    for ev in _blocking_bot(seen).run(USER, events=True):
        types.append(ev.type)
        if ev.type == "tool_start":
            seen.set()
        elif ev.type == "tool_end":
            results.append(ev.data["result"])
    _shape(types, results)


def test_tool_start_reaches_arun_events_while_the_tool_runs_in_a_worker_thread() -> None:
    seen = threading.Event()

    async def main() -> tuple[list[str], list[Any]]:
        types, results = [], []
        async for ev in _blocking_bot(seen).arun(USER, events=True):
            types.append(ev.type)
            if ev.type == "tool_start":
                seen.set()
            elif ev.type == "tool_end":
                results.append(ev.data["result"])
        return types, results

    _shape(*asyncio.run(main()))


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_tools_own_events_come_out_while_it_runs_bounded_and_in_order(driver: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(event_stream, "LIMIT", 4)
    told = threading.Event()
    most: list[int] = []

    @tool
    def busy(n: int) -> str:
        """Reports progress, then waits until the consumer saw the first report."""
        ctx = current_run()
        for i in range(n):
            tell(ctx.callbacks, PROGRESS, ctx.agent_name, ctx, {"text": f"step {i}"})
        if not told.wait(WAIT):
            raise TimeoutError("the tool's progress did not come out while it ran")
        return "busy done"

    bot = FnCallAgent(llm=ScriptedLLM([[tool_call("busy", {"n": 40})], "Ok."]), function_list=[busy])
    texts: list[str] = []

    def saw(ev: Any, listener: Any) -> None:
        most.append(len(listener.pending))
        if ev.type == "progress":
            texts.append(ev.data["text"])
            if len(texts) == 40:
                told.set()

    if driver == "run":
        run = bot.run(USER, events=True)
        for ev in run:
            saw(ev, run.context.events)
    else:

        async def main() -> None:
            arun = bot.arun(USER, events=True)
            async for ev in arun:
                saw(ev, arun.context.events)

        asyncio.run(main())
    assert texts == [f"step {i}" for i in range(40)]  # none lost, in order
    assert max(most) <= 5  # the tool's thread waited for the stream instead of running LIMIT ahead


def _retried_call(server: Any, first: dict[str, Any], retry: dict[str, Any]) -> FnCallAgent:
    written: list[str] = []

    def write_file(path: str) -> str:
        """Write a file."""
        written.append(path)
        return f"wrote {path}"

    server.add(
        OpenAIReply(tool_calls=[("write_file", first)], chunk_size=2, drop_after=8),
        OpenAIReply(tool_calls=[("write_file", retry)], chunk_size=2),
        OpenAIReply(text="Saved."),
    )
    cfg = {"model": "test-model", "model_server": server.base_url, "api_key": "k",
           "generate_cfg": {"retry_delay": 0.01}}  # fmt: skip
    return FnCallAgent(function_list=[write_file], llm=cfg)


def rebuilt(events: list[Any]) -> dict[int, str]:
    """Each call's arguments as a consumer of the stream rebuilds them (a restart forgets what came before)."""
    calls: dict[int, str] = {}
    for ev in events:
        if ev.type == "tool_call_restart":
            calls[ev.data["index"]] = ""
        elif ev.type == "tool_call_delta":
            calls[ev.data["index"]] = calls.get(ev.data["index"], "") + ev.data["arguments"]
    return {i: a for i, a in calls.items() if a}


@pytest.mark.parametrize("retry", [{"path": "notes-a.txt"}, {"path": "other.txt"}])
def test_a_retried_stream_rebuilds_exactly_the_final_arguments(openai_server: Any, retry: dict[str, Any]) -> None:
    bot = _retried_call(openai_server, {"path": "notes-a.txt"}, retry)
    events = list(bot.run(USER, events=True))
    assert len(openai_server.chat_requests) == 3  # the first stream broke while arguments showed, and was retried
    (args,) = rebuilt(events).values()
    assert json.loads(args) == retry
    restarts = [ev for ev in events if ev.type == "tool_call_restart"]
    assert len(restarts) == (0 if retry == {"path": "notes-a.txt"} else 1)  # the same prefix: only what is new
    assert next(ev for ev in events if ev.type == "tool_start").data["arguments"] == args


class ThreadsStarted:
    """Counts the threads started while it is entered (each calls the profile hook `threading.setprofile` gives new
    threads once, at its start, and then drops it), with their names."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lock = threading.Lock()

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        import sys

        sys.setprofile(None)  # once a thread
        with self.lock:
            self.names.append(threading.current_thread().name)

    def __enter__(self) -> ThreadsStarted:
        threading.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]


def _many_calls_bot() -> FnCallAgent:
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    script: list[Any] = [tool_call("lookup", {"key": f"k{i}"}) for i in range(12)]  # twelve turns of one call
    script.append([tool_call("lookup", {"key": f"p{i}"}) for i in range(4)])  # then four calls at once
    return FnCallAgent(llm=ScriptedLLM([*script, "All looked up."]), function_list=[lookup], max_llm_calls=20)


def test_the_event_stream_waits_for_many_tool_calls_without_a_thread_per_call() -> None:
    with ThreadsStarted() as plain:
        list(_many_calls_bot().run(USER))
    with ThreadsStarted() as stream:
        events: list[Any] = list(_many_calls_bot().run(USER, events=True))
    ends = [ev.data["result"] for ev in events if ev.type == "tool_end"]
    assert ends == [f"value of k{i}" for i in range(12)] + [f"value of p{i}" for i in range(4)]
    assert len(plain.names) == 4  # the four calls at once: the batch's workers
    # the stream adds one worker thread of its own for the whole run, not one per wait (it was 16 more)
    assert len(stream.names) <= len(plain.names) + 1, stream.names
    for t in threading.enumerate():  # and it ends with the stream
        if t.name == "chatagent-events-wait":
            t.join(WAIT)
            assert not t.is_alive()


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_model_start_comes_out_before_the_models_first_chunk(openai_server: Any, driver: str) -> None:
    seen = threading.Event()
    held: list[bool] = []

    def answer(request: Any) -> OpenAIReply:  # the server holds its whole reply until the test saw model_start
        held.append(seen.wait(WAIT))
        return OpenAIReply(text="Hello there.")

    openai_server.add(answer)
    bot = FnCallAgent(llm={"model": "m", "model_server": openai_server.base_url, "api_key": "k"}, name="bot")
    types: list[str] = []

    def saw(ev: Any) -> None:
        types.append(ev.type)
        if ev.type == "model_start":
            seen.set()

    if driver == "run":
        for ev in bot.run(USER, events=True):
            saw(ev)
    else:

        async def main() -> None:
            async for ev in bot.arun(USER, events=True):
                saw(ev)

        asyncio.run(main())
    assert held == [True], "model_start came out only with the model's first chunk"
    assert types[:2] == ["run_start", "model_start"] and "text_delta" in types and types[-1] == "run_end"


class _QwenStyle(Agent):
    """A `_run` written the Qwen-Agent way: it calls its tool in place (so `arun()` steps it in a worker thread)."""

    def _run(self, messages: Any, lang: str = "en", **kwargs: Any) -> Any:
        out = self._call_tool(self.tool_name, {"city": "Oslo"} if self.tool_name == "slow" else {"task": "look k"})
        yield [Message(role="assistant", content=f"got {out}")]

    tool_name = "slow"


def test_an_in_thread_arun_step_gives_its_events_out_while_it_runs() -> None:
    seen = threading.Event()

    @tool
    def slow(city: str) -> str:
        """Waits until the consumer saw the call start."""
        if not seen.wait(WAIT):
            raise TimeoutError("tool_start did not reach the consumer while the step ran")
        return f"done for {city}"

    bot = _QwenStyle(function_list=[slow], llm=ScriptedLLM(["unused"]))
    assert not bot.async_safe  # its own _run: arun() steps it in a worker thread

    async def main() -> list[Any]:
        out = []
        async for ev in bot.arun(USER, events=True):
            out.append(ev)
            if ev.type == "tool_start":
                seen.set()
        return out

    events = asyncio.run(main())
    assert [ev.data["result"] for ev in events if ev.type == "tool_end"] == ["done for Oslo"]
    assert events[-1].type == "run_end" and events[-1].data["error"] is None


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_an_agent_tool_called_in_place_under_the_event_stream_ends(driver: str) -> None:
    """A step that drives a loop of its own (a Qwen-style `_call_tool` of an agent used as a tool, whose agent calls a
    tool) carries its waits out in place: they cannot wait for the stream's worker thread, which may be the one
    running them."""
    inner = FnCallAgent(llm=ScriptedLLM([tool_call("lookup_key", {"key": "k"}), "inner done"]),
                        function_list=[lookup_key], name="inner", description="Looks keys up.")  # fmt: skip
    bot = _QwenStyle(function_list=[AgentTool(inner)], llm=ScriptedLLM(["unused"]))
    bot.tool_name = "inner"
    box: list[list[Any]] = []

    def consume() -> None:
        if driver == "run":
            box.append(list(bot.run(USER, events=True)))
        else:

            async def main() -> list[Any]:
                return [ev async for ev in bot.arun(USER, events=True)]

            box.append(asyncio.run(main()))

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    worker.join(WAIT)
    assert box, "the run did not end: a nested loop's tool wait waited for the thread it ran in"
    ends = [ev.data["result"] for ev in box[0] if ev.type == "tool_end"]
    assert ends == ["value of k", "inner done"]


def lookup_key(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"
