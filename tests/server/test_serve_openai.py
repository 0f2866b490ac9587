"""`chatagent serve`: the official openai SDK as the client of AgentServer over real agents on loopback.

(Attacks on the server are in tests/security/test_security_serve.py; the process, its signals and its draining in
tests/server/test_serve_process.py.)"""

from __future__ import annotations

import hashlib
import json
import time

import httpx
import openai
import pytest

from chatagent import Agent, BasicAgent, Message, ModelServiceError, Reply, ScriptedLLM, tool_call
from chatagent.llm.base import BaseChatModel
from chatagent.llm.prepare import untrusted
from chatagent.schema import FUNCTION
from chatagent.schema.fragment import fragment
from chatagent.server.runner import AgentServer
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
                result = Message(FUNCTION, f"sunny in {args['city']}", name="get_weather", extra=dict(call.extra or {}))
                yield [fragment(result, len(response))]
                response.append(result)


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


JSON = {"Content-Type": "application/json"}


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
    with serve(BasicAgent(llm=llm, name="counter")) as server:
        stream = client(server).chat.completions.create(
            model="counter",
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
                    for ch in c.chat.completions.create(model="weather", messages=msgs, stream=True)
                )
            else:
                text = c.chat.completions.create(model="weather", messages=msgs).choices[0].message.content
        assert text == "Let me check.\n\nIt is sunny."
        assert agent.tool_runs == [{"city": "Paris"}]
        second = agent.llm.calls[1].messages
        assert second[-1].role == FUNCTION and second[-1].text == untrusted("sunny in Paris", "tool get_weather")


def test_fncall_agent_over_the_api() -> None:
    fncall = pytest.importorskip("chatagent.agents.fncall", reason="FnCallAgent has not landed yet")

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first
            b: the second
        """
        return a + b

    llm = ScriptedLLM(
        [tool_call("add", {"a": 2, "b": 3}), lambda msgs, fns: f"The sum is {msgs[-1].text.split()[-2]}."]
    )
    agent = fncall.FnCallAgent(function_list=[add], llm=llm)
    with serve(agent) as server:
        out = client(server).chat.completions.create(model="chatagent", messages=[{"role": "user", "content": "2+3?"}])
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
        out = client(server).chat.completions.create(model="chatagent", messages=history)
        assert out.choices[0].message.content == "ok"
    sent = llm.calls[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "function", "user"]
    assert sent[2].extra["function_id"] == "c1"


def test_bad_requests_are_400_with_a_readable_message() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="unused"))) as server:
        c = client(server)
        with pytest.raises(openai.BadRequestError, match="non-empty list"):
            c.chat.completions.create(model="chatagent", messages=[])
        with pytest.raises(openai.BadRequestError, match="role"):
            c.chat.completions.create(model="chatagent", messages=[{"role": "wizard", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="tools"):
            c.chat.completions.create(
                model="chatagent",
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "function", "function": WEATHER}],
            )
        raw = httpx.post(f"{server.url}/chat/completions", content=b"{not json", headers=JSON, timeout=10)
        assert raw.status_code == 400 and "JSON" in raw.json()["error"]["message"]
        assert httpx.get(f"{server.url}/nowhere", timeout=10).status_code == 404


def test_request_size_is_bounded() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="ok")), max_request_bytes=10_000) as server:
        big = {"model": "chatagent", "messages": [{"role": "user", "content": "x" * 20_000}]}
        r = httpx.post(f"{server.url}/chat/completions", json=big, timeout=10)
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        small = client(server).chat.completions.create(model="chatagent", messages=[{"role": "user", "content": "hi"}])
        assert small.choices[0].message.content == "ok"


def test_api_key_is_enforced_when_set() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="secret answer")), api_key="k-123") as server:
        with pytest.raises(openai.AuthenticationError):
            client(server, "wrong").chat.completions.create(
                model="chatagent", messages=[{"role": "user", "content": "hi"}]
            )
        assert httpx.get(f"{server.url}/models", timeout=10).status_code == 401
        r = httpx.post(f"{server.url}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 401 and "secret" not in r.text
        ok = client(server, "k-123").chat.completions.create(
            model="chatagent", messages=[{"role": "user", "content": "hi"}]
        )
        assert ok.choices[0].message.content == "secret answer"


def test_model_errors_are_reported_not_crashed() -> None:
    llm = ScriptedLLM([ModelServiceError(400, "the prompt is bad"), ModelServiceError(400, "still bad")])
    with serve(BasicAgent(llm=llm)) as server:
        c = client(server)
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(model="chatagent", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502 and "the prompt is bad" in str(info.value)
        with pytest.raises(openai.APIError, match="still bad"):
            list(
                c.chat.completions.create(model="chatagent", messages=[{"role": "user", "content": "hi"}], stream=True)
            )


def test_client_going_away_closes_the_model_stream() -> None:
    llm = PacedLLM(n=500, delay=0.01)
    with serve(BasicAgent(llm=llm)) as server:
        stream = client(server).chat.completions.create(
            model="chatagent", messages=[{"role": "user", "content": "go"}], stream=True
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
            c.chat.completions.create(model="chatagent", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 500 and info.value.body["code"] == "agent_error"
        assert "Traceback" not in str(info.value)


@pytest.mark.timeout(10)
def test_a_server_never_started_closes_at_once() -> None:
    server = AgentServer(BasicAgent(llm=ScriptedLLM(default="x")), "127.0.0.1", 0)
    port = server.socket.getsockname()[1]
    server.close()  # nothing to wait for: it never served
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
    bot = Assistant(llm=llm, name="docs", files=[str(manual)], rag_cfg={"store": DocStore(tmp_path / "ws")})
    ask = [{"role": "user", "content": "boiler pressure limit?"}]
    with serve(bot) as server:
        c = client(server)
        out = c.chat.completions.create(model="docs", messages=ask)
        chunks = list(c.chat.completions.create(model="docs", messages=ask, stream=True))
    assert out.choices[0].message.content == "7 bar [manual.txt, p. 1]." and out.choices[0].finish_reason == "stop"
    sources = out.choices[0].message.model_extra["chatagent"]["sources"]
    assert sources == [{"file": "manual.txt", "pages": [1], "text": "The boiler pressure limit is 7 bar."}]
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].choices[0].delta.model_extra["chatagent"]["sources"] == sources
    assert all("chatagent" not in (ch.choices[0].delta.model_extra or {}) for ch in chunks[:-1])


def test_healthz_and_unknown_routes_answer_json() -> None:
    with serve(BasicAgent(llm=ScriptedLLM(default="x")), api_key="k-123456") as server:
        base = server.url.removesuffix("/v1")
        assert httpx.get(f"{base}/healthz", timeout=10).json() == {"status": "ok"}  # no key needed
        r = httpx.get(f"{base}/nowhere", timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = httpx.get(f"{server.url}/chat/completions", timeout=10)
        assert r.status_code == 405 and "POST /v1/chat/completions" in r.json()["error"]["message"]


def test_an_unknown_model_is_a_404_and_agents_are_chosen_by_name() -> None:
    agents = {
        "alpha": BasicAgent(llm=ScriptedLLM(default="from alpha")),
        "beta": BasicAgent(llm=ScriptedLLM(default="from beta")),
    }
    with serve(agents) as server:
        c = client(server)
        assert [m.id for m in c.models.list()] == ["alpha", "beta"]
        assert c.models.retrieve("beta").id == "beta"
        with pytest.raises(openai.NotFoundError):
            c.models.retrieve("gamma")
        hi = [{"role": "user", "content": "hi"}]
        assert c.chat.completions.create(model="beta", messages=hi).choices[0].message.content == "from beta"
        assert c.chat.completions.create(model="alpha", messages=hi).choices[0].message.content == "from alpha"
        with pytest.raises(openai.NotFoundError) as info:
            c.chat.completions.create(model="gpt-4o", messages=hi)
        assert info.value.body["code"] == "model_not_found" and "'alpha', 'beta'" in info.value.body["message"]
        # a request naming no model (as some curl users send) goes to the first agent, as vLLM does
        r = httpx.post(f"{server.url}/chat/completions", json={"messages": hi}, timeout=10)
        assert r.json()["choices"][0]["message"]["content"] == "from alpha"


def test_finish_reason_is_length_when_the_answer_was_cut(openai_server) -> None:
    from tests.support.openai_server import Reply as ServerReply

    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}
    with serve(BasicAgent(llm=llm, name="cut")) as server:
        c = client(server)
        for stream in (False, True):
            openai_server.add(ServerReply(text="The answer was cut at the tok", finish_reason="length"))
            openai_server.add(ServerReply(text="A whole answer."))
            msgs = [{"role": "user", "content": "long story"}]
            if stream:
                chunks = list(c.chat.completions.create(model="cut", messages=msgs, stream=True))
                reasons = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
                extra = chunks[-1].choices[0].delta.model_extra["chatagent"]
                again = list(c.chat.completions.create(model="cut", messages=msgs, stream=True))
                assert [ch.choices[0].finish_reason for ch in again if ch.choices[0].finish_reason] == ["stop"]
            else:
                out = c.chat.completions.create(model="cut", messages=msgs)
                reasons, extra = [out.choices[0].finish_reason], out.choices[0].message.model_extra["chatagent"]
                assert c.chat.completions.create(model="cut", messages=msgs).choices[0].finish_reason == "stop"
            assert reasons == ["length"] and extra == {"stop_reason": "length"}


class SourcedAgent(Agent):
    """Answers with the model, then marks its final message with extras, public and private."""

    def _run(self, messages, lang="en", **kwargs):
        reply = yield from self._call_llm(messages)
        done = {"index": 0, "sources": [{"file": "a.pdf", "pages": [2]}], "pending_approval": {"tool": "rm"}}
        yield [Message.unchecked("assistant", "", None, None, None, {**done, "internal_state": "secret-xyz"})]
        return reply


def test_the_final_messages_public_extras_reach_the_client() -> None:
    want = {"sources": [{"file": "a.pdf", "pages": [2]}], "pending_approval": {"tool": "rm"}}
    with serve(SourcedAgent(llm=ScriptedLLM(default="See page 2."), name="docs")) as server:
        c = client(server)
        hi = [{"role": "user", "content": "where?"}]
        out = c.chat.completions.create(model="docs", messages=hi)
        assert out.choices[0].message.content == "See page 2."
        assert out.choices[0].message.model_extra["chatagent"] == want
        chunks = list(c.chat.completions.create(model="docs", messages=hi, stream=True))
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == "See page 2."
        assert chunks[-1].choices[0].delta.model_extra["chatagent"] == want
        assert all("chatagent" not in (ch.choices[0].delta.model_extra or {}) for ch in chunks[:-1])
        raw = httpx.post(f"{server.url}/chat/completions", json={"model": "docs", "messages": hi}, timeout=10)
        assert "secret-xyz" not in raw.text


def test_a_session_id_keeps_the_conversation_so_a_client_sends_only_the_new_message(tmp_path) -> None:
    from chatagent import Session

    store = f"sqlite:///{tmp_path}/sessions.db"
    llm = ScriptedLLM(default=lambda msgs, fns: f"you said {len(msgs)} things")
    with serve(BasicAgent(llm=llm, name="bot"), store=store, api_key="k-123456") as server:
        c = client(server, "k-123456")
        first = c.chat.completions.create(
            model="bot", messages=[{"role": "user", "content": "one"}], extra_body={"session_id": "trip"}
        )
        assert first.choices[0].message.content == "you said 1 things"
        stream = c.chat.completions.create(
            model="bot",
            messages=[{"role": "user", "content": "two"}],
            stream=True,
            extra_headers={"X-Session-Id": "trip"},
        )
        assert "".join(ch.choices[0].delta.content or "" for ch in stream) == "you said 3 things"
        assert [m.text for m in llm.calls[-1].messages] == ["one", "you said 1 things", "two"]
        other = c.chat.completions.create(
            model="bot", messages=[{"role": "user", "content": "hi"}], extra_body={"session_id": "other"}
        )
        assert other.choices[0].message.content == "you said 1 things"
        bad = httpx.post(
            f"{server.url}/chat/completions", headers={"Authorization": "Bearer k-123456"}, timeout=10,
            json={"model": "bot", "messages": [{"role": "user", "content": "x"}], "session_id": "a\nb"},
        )  # fmt: skip
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_session_id"
    user = [s.user for s in Session.list(store, user=None)]
    assert len(set(user)) == 1 and user[0].startswith("key:") and "k-123456" not in user[0]
    stored = Session("trip", store, user=user[0]).messages()
    assert [m["content"] for m in stored] == ["one", "you said 1 things", "two", "you said 3 things"]


def test_a_busy_session_is_a_409_and_a_client_leaving_gets_the_finished_turn_back(tmp_path) -> None:
    from chatagent import Session

    store = f"sqlite:///{tmp_path}/sessions.db"
    llm = PacedLLM(n=120, delay=0.01)
    user = "key:" + hashlib.sha256(b"k-1").hexdigest()[:16]  # the key's principal: its conversations are its own
    with serve(BasicAgent(llm=llm, name="slow"), store=store, api_key="k-1") as server:
        c = client(server, "k-1")
        msgs = [{"role": "user", "content": "go"}]
        stream = c.chat.completions.create(model="slow", messages=msgs, stream=True, extra_body={"session_id": "s1"})
        got = 0
        for chunk in stream:
            got += bool(chunk.choices and chunk.choices[0].delta.content)
            if got == 3:
                with pytest.raises(openai.ConflictError) as info:
                    c.chat.completions.create(model="slow", messages=msgs, extra_body={"session_id": "s1"})
                assert info.value.body["code"] == "session_busy"
                break
        stream.close()  # the client goes away: the turn goes on, on the server
        back = c.chat.completions.create(model="slow", messages=[], extra_body={"session_id": "s1", "resume": True})
        answer = back.choices[0].message.content
        assert answer.startswith("w0 w1 w2") and answer.strip().endswith("w119")  # the whole turn, finished meanwhile
        assert not llm.closed.is_set()  # its model stream was never cut
        again = c.chat.completions.create(model="slow", messages=[], stream=True,
                                          extra_body={"session_id": "s1", "resume": True})  # fmt: skip
        assert "".join(ch.choices[0].delta.content or "" for ch in again if ch.choices) == answer
        with pytest.raises(openai.BadRequestError, match="resume"):
            c.chat.completions.create(model="slow", messages=[], extra_body={"resume": True})
    stored = Session("s1", store, user=user).messages()
    assert [m["content"] for m in stored] == ["go", answer]


def test_the_app_mounts_inside_another_starlette_service() -> None:
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    from chatagent.server.runner import asgi_app

    async def home(request):
        return PlainTextResponse("my service")

    app = Starlette(
        routes=[
            Route("/", home),
            Mount(
                "/assistant",
                asgi_app(
                    BasicAgent(llm=ScriptedLLM(default="hello from inside"), name="helper"), server_names=["service"]
                ),
            ),  # the name it is reached by  # fmt: skip
        ]
    )

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
            assert (await http.get("/")).text == "my service"
            models = (await http.get("/assistant/v1/models")).json()
            body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
            out = (await http.post("/assistant/v1/chat/completions", json=body)).json()
            streamed = (await http.post("/assistant/v1/chat/completions", json={**body, "stream": True})).text
        return models, out, streamed

    models, out, streamed = asyncio.run(go())
    assert [m["id"] for m in models["data"]] == ["helper"]
    assert out["choices"][0]["message"]["content"] == "hello from inside"
    events = [e.removeprefix("data: ") for e in streamed.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "hello from inside"


def test_chunked_request_bodies_are_read_and_bounded() -> None:
    body = json.dumps({"model": "chatagent", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def chunked(data: bytes):
        for i in range(0, len(data), 7):
            yield data[i : i + 7]

    with serve(BasicAgent(llm=ScriptedLLM(default="ok")), max_request_bytes=10_000) as server:
        r = httpx.post(f"{server.url}/chat/completions", content=chunked(body), headers=JSON, timeout=10)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok"
        big = json.dumps({"model": "chatagent", "messages": [{"role": "user", "content": "x" * 20_000}]}).encode()
        r = httpx.post(f"{server.url}/chat/completions", content=chunked(big), headers=JSON, timeout=10)
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        assert (
            httpx.post(f"{server.url}/chat/completions", content=chunked(body), headers=JSON, timeout=10).status_code
            == 200
        )


def test_more_runs_than_allowed_get_429_and_the_server_goes_on() -> None:
    llm = PacedLLM(n=300, delay=0.01)
    with serve(BasicAgent(llm=llm, name="slow"), max_concurrency=1) as server:
        c = client(server)
        msgs = [{"role": "user", "content": "go"}]
        stream = c.chat.completions.create(model="slow", messages=msgs, stream=True)
        next(iter(stream))
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(model="slow", messages=msgs)
        stream.close()
        end = time.monotonic() + 10
        while True:  # the slot comes back once the server has seen the client leave
            try:
                out = c.chat.completions.create(model="slow", messages=msgs, stream=True)
                break
            except openai.RateLimitError:
                assert time.monotonic() < end
                time.sleep(0.05)
        assert next(iter(out)).choices[0].delta.role == "assistant"
        out.close()


def test_openais_file_part_is_read_and_named_by_its_filename(tmp_path, openai_server) -> None:
    """Issue 43.14: the OpenAI SDK's file part ({'type': 'file', 'file': {'filename', 'file_data'}}) was a 400
    ('file must be a string, got dict'); it is read as the document it carries, named by its filename, beside
    chatagent's own {'file': 'data:...'}; a file_id (an upload this server never had) is a clear 400."""
    import base64

    from chatagent import Assistant
    from chatagent.rag import DocStore
    from tests.support.openai_server import Reply as ServerReply

    data = base64.b64encode(b"The boiler pressure limit is 7 bar.").decode()
    openai_server.add(ServerReply(text="7 bar [manual.txt, p. 1]."), ServerReply(text="7 bar."))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    bot = Assistant(llm=llm, name="docs", rag_cfg={"store": DocStore(tmp_path / "ws")})
    with serve(bot) as server:
        c = client(server)
        for file_data in (f"data:text/plain;base64,{data}", data):  # a data: URL, and bare base64 as OpenAI shows
            part = {"type": "file", "file": {"filename": "manual.txt", "file_data": file_data}}
            ask = [{"role": "user", "content": [{"type": "text", "text": "boiler pressure limit?"}, part]}]
            out = c.chat.completions.create(model="docs", messages=ask)  # type: ignore[arg-type]
            sources = out.choices[0].message.model_extra["chatagent"]["sources"]
            assert [s["file"] for s in sources] == ["manual.txt"]
        sent = json.dumps(openai_server.chat_requests[0].json["messages"])
        assert "7 bar" in sent and "manual.txt" in sent
        with pytest.raises(openai.BadRequestError) as info:
            part = {"type": "file", "file": {"file_id": "file-abc123"}}
            c.chat.completions.create(model="docs", messages=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
        assert "file_id" in str(info.value) and info.value.status_code == 400
