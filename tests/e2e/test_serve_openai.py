"""`chatagent serve`: the official openai SDK as the client of AgentServer over real agents on loopback."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from chatagent import Agent, BasicAgent, Message, ModelServiceError, Reply, ScriptedLLM, tool_call
from chatagent.llm.base import BaseChatModel
from chatagent.schema import FUNCTION
from chatagent.server import AgentServer
from tests.gui.test_gui_session import PacedLLM

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


class WeatherAgent(Agent):
    """A tool-using agent written against the plain Agent API: it runs its tool server-side."""

    def __init__(self, llm: BaseChatModel) -> None:
        super().__init__(llm=llm, name="weather")
        self.tool_runs: list[dict] = []

    def _run(self, messages, lang="en", **kwargs):
        response: list[Message] = []
        for _ in range(3):
            reply = yield from self._call_llm(messages + response, [WEATHER], start=len(response))
            response += reply
            calls = [m for m in reply if m.function_call is not None]
            if not calls:
                return
            for call in calls:
                args = json.loads(call.function_call.arguments)
                self.tool_runs.append(args)
                result = Message(FUNCTION, f"sunny in {args['city']}", name="get_weather", extra=dict(call.extra))
                result.extra.pop("index", None)
                yield [
                    Message._make(
                        FUNCTION, result.content, "get_weather", None, None, {**result.extra, "index": len(response)}
                    )
                ]
                response.append(result)


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def serve(agent: Agent, **kwargs) -> AgentServer:
    return AgentServer(agent, "127.0.0.1", 0, **kwargs).start()


def client(server: AgentServer, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=20)


def test_models_and_plain_completion() -> None:
    llm = ScriptedLLM(["Hello there, friend."])
    with serve(BasicAgent(llm=llm, name="greeter")) as server:
        c = client(server)
        assert [m.id for m in c.models.list()] == ["greeter"]
        out = c.chat.completions.create(model="greeter", messages=[{"role": "user", "content": "hi"}])
    assert out.choices[0].message.content == "Hello there, friend."
    assert out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens > 0 and out.usage.prompt_tokens > 0
    assert llm.calls[0].messages[-1].text == "hi"


def test_streaming_completion_with_reasoning_and_usage() -> None:
    llm = ScriptedLLM([Reply(text="One two three four five.", reasoning="Count.", chunk_size=3)])
    with serve(BasicAgent(llm=llm)) as server:
        stream = client(server).chat.completions.create(
            model="anything",
            messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "count"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(texts) == "One two three four five."
    assert len(texts) >= 5  # it really streamed
    reasoning = [(c.choices[0].delta.model_extra or {}).get("reasoning_content") for c in chunks if c.choices]
    assert "".join(r for r in reasoning if r) == "Count."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert llm.calls[0].messages[0].role == "system"


def test_tool_using_agent_runs_tools_server_side() -> None:
    script = [Reply(text="Let me check.", function_calls=[tool_call("get_weather", {"city": "Paris"})]), "It is sunny."]
    for stream in (False, True):
        agent = WeatherAgent(ScriptedLLM(list(script)))
        with serve(agent) as server:
            c = client(server)
            msgs = [{"role": "user", "content": "weather in Paris?"}]
            if stream:
                text = "".join(
                    ch.choices[0].delta.content or ""
                    for ch in c.chat.completions.create(model="w", messages=msgs, stream=True)
                )
            else:
                text = c.chat.completions.create(model="w", messages=msgs).choices[0].message.content
        assert text == "Let me check.\n\nIt is sunny."
        assert agent.tool_runs == [{"city": "Paris"}]
        second = agent.llm.calls[1].messages
        assert second[-1].role == FUNCTION and second[-1].text == "sunny in Paris"


def test_fncall_agent_over_the_api() -> None:
    fncall = pytest.importorskip("chatagent.agents.fncall", reason="FnCallAgent has not landed yet")

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first
            b: the second
        """
        return a + b

    llm = ScriptedLLM([tool_call("add", {"a": 2, "b": 3}), lambda msgs, fns: f"The sum is {msgs[-1].text}."])
    agent = fncall.FnCallAgent(function_list=[add], llm=llm)
    with serve(agent) as server:
        out = client(server).chat.completions.create(model="x", messages=[{"role": "user", "content": "2+3?"}])
    assert out.choices[0].message.content == "The sum is 5."


def test_openai_style_history_is_accepted() -> None:
    llm = ScriptedLLM(["ok"])
    history = [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "user", "content": "thanks"},
    ]
    with serve(BasicAgent(llm=llm)) as server:
        assert client(server).chat.completions.create(model="x", messages=history).choices[0].message.content == "ok"
    sent = llm.calls[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "function", "user"]
    assert sent[2].extra["function_id"] == "c1"


def test_bad_requests_are_400_with_a_readable_message() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="unused"))) as server:
        c = client(server)
        with pytest.raises(openai.BadRequestError, match="non-empty list"):
            c.chat.completions.create(model="x", messages=[])
        with pytest.raises(openai.BadRequestError, match="role"):
            c.chat.completions.create(model="x", messages=[{"role": "wizard", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="tools"):
            c.chat.completions.create(
                model="x",
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "function", "function": WEATHER}],
            )
        raw = httpx.post(f"{server.url}/chat/completions", content=b"{not json", timeout=10)
        assert raw.status_code == 400 and "JSON" in raw.json()["error"]["message"]
        assert httpx.get(f"{server.url}/nowhere", timeout=10).status_code == 404


def test_request_size_is_bounded() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="ok")), max_request_bytes=10_000) as server:
        big = {"model": "x", "messages": [{"role": "user", "content": "x" * 20_000}]}
        r = httpx.post(f"{server.url}/chat/completions", json=big, timeout=10)
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        small = client(server).chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert small.choices[0].message.content == "ok"


def test_api_key_is_enforced_when_set() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="secret answer")), api_key="k-123") as server:
        with pytest.raises(openai.AuthenticationError):
            client(server, "wrong").chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert httpx.get(f"{server.url}/models", timeout=10).status_code == 401
        r = httpx.post(f"{server.url}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 401 and "secret" not in r.text
        ok = client(server, "k-123").chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert ok.choices[0].message.content == "secret answer"


def test_model_errors_are_reported_not_crashed() -> None:
    llm = ScriptedLLM([ModelServiceError(400, "the prompt is bad"), ModelServiceError(400, "still bad")])
    with serve(BasicAgent(llm=llm)) as server:
        c = client(server)
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502 and "the prompt is bad" in str(info.value)
        with pytest.raises(openai.APIError, match="still bad"):
            list(c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], stream=True))


def test_client_going_away_closes_the_model_stream() -> None:
    llm = PacedLLM(n=500, delay=0.01)
    with serve(BasicAgent(llm=llm)) as server:
        stream = client(server).chat.completions.create(
            model="x", messages=[{"role": "user", "content": "go"}], stream=True
        )
        got = 0
        for chunk in stream:
            got += bool(chunk.choices and chunk.choices[0].delta.content)
            if got == 3:
                break
        stream.close()
        assert llm.closed.wait(10), "the model's stream was not closed after the client left"
    assert llm.sent < llm.n


def test_a_bug_in_the_agent_is_a_500_not_the_clients_fault() -> None:
    llm = ScriptedLLM([ValueError("internal detail"), ValueError("internal detail")])
    with serve(BasicAgent(llm=llm)) as server:
        c = client(server)
        with pytest.raises(openai.InternalServerError) as info:
            c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 500 and info.value.body["code"] == "agent_error"
        assert "Traceback" not in str(info.value)


@pytest.mark.timeout(10)
def test_a_server_never_started_closes_at_once() -> None:
    server = AgentServer(BasicAgent(llm=ScriptedLLM(default="x")), "127.0.0.1", 0)
    port = server.httpd.server_address[1]
    server.close()  # shutdown() would wait forever for a serve loop that never ran
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_the_assistants_sources_and_a_cut_answer_reach_the_client(tmp_path, openai_server) -> None:
    """Sources ride in a field the openai SDK ignores (it keeps it in model_extra); a cut answer says 'length'."""
    from chatagent import Assistant
    from chatagent.rag import DocStore
    from tests.support.openai_server import Reply as ServerReply

    manual = tmp_path / "manual.txt"
    manual.write_text("The boiler pressure limit is 7 bar.", encoding="utf-8")
    openai_server.add(ServerReply(text="7 bar [manual.txt, p. 1]."), ServerReply(text="7", finish_reason="length"))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": DocStore(tmp_path / "ws")})
    ask = [{"role": "user", "content": "boiler pressure limit?"}]
    with serve(bot) as server:
        c = client(server)
        out = c.chat.completions.create(model="a", messages=ask)
        chunks = list(c.chat.completions.create(model="a", messages=ask, stream=True))
    assert out.choices[0].message.content == "7 bar [manual.txt, p. 1]." and out.choices[0].finish_reason == "stop"
    sources = out.model_extra["sources"]
    assert sources == [{"file": "manual.txt", "pages": [1], "text": "The boiler pressure limit is 7 bar."}]
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].model_extra["sources"] == sources
    assert all("sources" not in (ch.model_extra or {}) for ch in chunks[:-1])
