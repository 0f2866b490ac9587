"""A tool call's arguments stream out as they arrive, on every backend that streams them (OpenAI-compatible, DashScope,
Anthropic, Bedrock, the Responses API; Gemini sends a call whole), against each protocol's loopback server: a 20 kB
argument arrives in many fragments, in delta mode and in the cumulative view, and the complete call then replaces
them (docs/streaming.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatagent import FnCallAgent, Message, merge_delta
from chatagent.schema.fragment import STREAMING_CALL
from tests.support.dashscope_server import Reply as DashScopeReply
from tests.support.openai_server import Reply as OpenAIReply
from tests.support.provider_reply import Reply

BODY = "".join(f"line {n:05d}: the quick brown fox jumps over the lazy dog\n" for n in range(340))  # ~20 kB
ARGS = {"path": "notes.txt", "content": BODY}
USER = [{"role": "user", "content": "Write my notes."}]
PROVIDERS = ["openai", "dashscope", "anthropic", "gemini", "bedrock", "responses"]


def _config(provider: str, request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any], type]:
    server = request.getfixturevalue(f"{provider}_server")
    if provider == "openai":
        cfg = {"model": "test-model", "model_server": server.base_url, "api_key": "k"}
        return server, cfg, OpenAIReply
    if provider == "dashscope":
        server.api_key = "sk-test"
        cfg = {"model": "qwen-plus", "model_server": "dashscope", "api_key": "sk-test", "base_url": server.base_url}
        return server, cfg, DashScopeReply
    if provider == "anthropic":
        cfg = {"model_type": "anthropic", "model": "claude-sonnet-4-5", "model_server": server.base_url,
               "api_key": server.api_key}  # fmt: skip
    elif provider == "gemini":
        cfg = {"model_type": "gemini", "model": "gemini-2.5-flash", "model_server": server.base_url,
               "api_key": server.api_key}  # fmt: skip
    elif provider == "bedrock":
        cfg = {"model_type": "bedrock", "model": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
               "model_server": server.base_url, "region": server.region}  # fmt: skip
    else:
        cfg = {"model_type": "oai", "api": "responses", "model": "gpt-5-mini", "model_server": server.base_url,
               "api_key": server.api_key}  # fmt: skip
    return server, cfg, Reply


def _agent(cfg: dict[str, Any], written: list[str]) -> FnCallAgent:
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written.append(content)
        return f"wrote {len(content)} characters to {path}"

    return FnCallAgent(function_list=[write_file], llm=cfg)


def _script(server: Any, reply_type: type) -> None:
    server.add(
        reply_type(text="Writing them.", tool_calls=[("write_file", ARGS)], chunk_size=64),
        reply_type(text="Done."),
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_long_argument_arrives_in_many_fragments_in_delta_mode(provider: str, request: pytest.FixtureRequest) -> None:
    server, cfg, reply_type = _config(provider, request)
    _script(server, reply_type)
    written: list[str] = []
    full: list[dict[str, Any]] = []
    pieces: list[str] = []
    call_at = -1  # where the complete call came, counted in fragments
    seen = 0
    for delta in _agent(cfg, written).run(USER, delta_stream=True):
        for f in delta:
            seen += 1
            streaming = (f.get("extra") or {}).get(STREAMING_CALL)
            if streaming is not None:
                assert call_at < 0, "arguments streamed after the call was complete"
                if not pieces:
                    assert streaming["name"] == "write_file" and f["extra"]["function_id"]
                pieces.append(streaming["arguments"])
            elif f.get("function_call") is not None:
                assert f.get("replace") is True or provider == "gemini" and not pieces
                call_at = seen
        merge_delta(full, delta)
    assert written == [BODY]  # the tool got the whole argument
    call = next(m for m in full if m.get("function_call"))
    assert json.loads(call["function_call"]["arguments"]) == ARGS and STREAMING_CALL not in (call.get("extra") or {})
    assert "".join(pieces) == call["function_call"]["arguments"]  # the pieces add up to the call
    if provider == "gemini":  # the Generative Language API sends a functionCall whole: one piece
        assert len(pieces) == 1
    else:
        assert len(pieces) > 100  # as the server streamed it: 64 characters an event
    assert full[-1]["content"] == "Done."


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock", "responses"])
def test_the_cumulative_view_shows_the_argument_growing(provider: str, request: pytest.FixtureRequest) -> None:
    server, cfg, reply_type = _config(provider, request)
    _script(server, reply_type)
    written: list[str] = []
    agent = _agent(cfg, written)
    growing: list[str] = []
    last: list[dict[str, Any]] = []
    for rsp in agent.run(USER):
        last = rsp
        for m in rsp:
            streaming = (m.get("extra") or {}).get(STREAMING_CALL)
            if streaming is not None:
                assert m.get("function_call") is None  # a call appears only complete
                growing.append(streaming["arguments"])
    assert len(growing) > 100 and all(b.startswith(a) for a, b in zip(growing, growing[1:], strict=False))
    call = next(m for m in last if m.get("function_call"))
    assert call["function_call"]["arguments"].startswith(growing[-1]) and len(growing[-1]) > 19_000
    assert len(growing[0]) < 100  # it was shown from its first pieces on
    _script(server, reply_type)
    assert _steady(agent.run_nonstream(USER)) == _steady(last)  # the last yield is the whole response
    assert not any(STREAMING_CALL in (m.get("extra") or {}) for m in last)


def test_a_call_without_text_before_it_is_message_0_until_it_is_complete(openai_server: Any) -> None:
    from chatagent import get_chat_model

    openai_server.add(OpenAIReply(tool_calls=[("write_file", ARGS)], chunk_size=512))
    llm = get_chat_model({"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"})
    fn = {"name": "write_file", "parameters": {"type": "object", "properties": {"path": {}, "content": {}}}}
    frags = [f for d in llm.chat([Message("user", "Write my notes.")], [fn], delta_stream=True) for f in d]
    assert frags[0].index == 0 and frags[0].extra[STREAMING_CALL]["name"] == "write_file"
    assert all(f.index == 0 for f in frags) and len(frags) > 30
    last = frags[-1]
    assert last.replace and last.function_call is not None and json.loads(last.function_call.arguments) == ARGS
    assert last.extra == {"function_id": frags[0].extra["function_id"]}


def _steady(response: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The response without what differs from one request to the next (the Responses API's response and call ids)."""
    out = []
    for m in response:
        extra = {k: v for k, v in (m.get("extra") or {}).items() if k not in ("reasoning_state", "function_id")}
        out.append({**m, "extra": extra})
    return out


def test_text_a_server_sends_after_a_call_follows_it_and_the_next_request_is_one_turn(openai_server: Any) -> None:
    from chatagent import get_chat_model
    from chatagent.schema import to_openai

    def event(delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        return f"data: {json.dumps(chunk)}\n\n"

    call = {"index": 0, "id": "call_w", "type": "function", "function": {"name": "write_file", "arguments": '{"pa'}}
    body = (
        event({"tool_calls": [call]})
        + event({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]})
        + event({"content": "Saving it."})
        + event({}, "tool_calls")
        + "data: [DONE]\n\n"
    )
    openai_server.add(OpenAIReply(body=body, content_type="text/event-stream"))
    llm = get_chat_model({"model": "test-model", "model_server": openai_server.base_url, "api_key": "k"})
    fn = {"name": "write_file", "parameters": {"type": "object", "properties": {"path": {}}}}
    deltas = list(llm.chat([Message("user", "Save a.")], [fn], delta_stream=True))
    reply = _merged(deltas)
    assert [(m.function_call is not None, m.content) for m in reply] == [(True, ""), (False, "Saving it.")]
    assert [f.index for d in deltas for f in d if f.content] == [1]  # the text never went into the call's message
    sent = to_openai([Message("user", "Save a."), *reply])
    assert sent[1] == {"role": "assistant", "content": "Saving it.",
                       "tool_calls": [{"id": "call_w", "type": "function",
                                       "function": {"name": "write_file", "arguments": '{"path": "a"}'}}]}  # fmt: skip


def _merged(deltas: list[list[Any]]) -> list[Any]:
    full: list[Any] = []
    for d in deltas:
        merge_delta(full, d)
    return full


def test_every_way_of_adding_fragments_up_agrees_on_a_streaming_call() -> None:
    """Response (cumulative), DictResponse, Collector (linear), merge_delta and WholeLists (a Qwen-style agent's
    whole lists back into fragments) add a streaming call's pieces up the same way, and the complete call replaces
    them."""
    from chatagent import FunctionCall
    from chatagent.schema.fragment import Fragment
    from chatagent.schema.stream import Collector, DictResponse, Response, WholeLists

    pieces = ['{"path": "a.txt", ', '"content": "', "x" * 50, '"}']
    stream = [
        [Fragment("assistant", "Writing.", index=0)],
        [
            Fragment(
                "assistant",
                "",
                extra={"function_id": "c1", STREAMING_CALL: {"name": "w", "arguments": pieces[0]}},
                index=1,
            )
        ],  # fmt: skip
        *[[Fragment("assistant", "", extra={STREAMING_CALL: {"arguments": p}}, index=1)] for p in pieces[1:]],
    ]
    done = [Fragment("assistant", "", function_call=FunctionCall("w", "".join(pieces)), extra={"function_id": "c1"},
                     index=1, replace=True)]  # fmt: skip
    response, dicts, collector, merged = Response(), DictResponse(), Collector(), []
    for frs in stream:
        response.add(frs)
        dicts.add(frs)
        collector.add(frs)
        merge_delta(merged, [f.model_dump() for f in frs])
    want = {"function_id": "c1", STREAMING_CALL: {"name": "w", "arguments": "".join(pieces)}}
    assert response.messages[1].extra == dicts.messages[1]["extra"] == want
    assert collector.messages()[1].extra == collector.dumps()[1]["extra"] == merged[1]["extra"] == want
    lists = WholeLists()
    regrown = [lists.fragments(response.messages[:1])]
    cumulative = Response()
    for n in range(len(stream) - 1):  # what a Qwen-style agent yields: the whole lists, growing
        partial = Response()
        for frs in stream[: n + 2]:
            partial.add(frs)
        regrown.append(lists.fragments(partial.messages))
    for frs in regrown:
        cumulative.add(frs)
    assert cumulative.messages[1].extra == want
    assert [f.extra[STREAMING_CALL]["arguments"] for frs in regrown[2:] for f in frs] == pieces[1:]  # only the new
    for adder in (response, dicts, collector):
        adder.add(done)
    merge_delta(merged, [f.model_dump() for f in done])
    assert response.messages[1].extra == dicts.messages[1]["extra"] == merged[1]["extra"] == {"function_id": "c1"}
    assert collector.messages()[1].function_call == FunctionCall("w", "".join(pieces))
    assert collector.messages()[1].extra == {"function_id": "c1"}


def test_a_stream_broken_while_only_arguments_showed_is_retried_and_the_retry_replaces_them(
    openai_server: Any,
) -> None:
    from chatagent import get_chat_model

    first = OpenAIReply(tool_calls=[("write_file", {"path": "a.txt"}), ("write_file", {"path": "c"})], chunk_size=2,
                        drop_after=14)  # fmt: skip
    openai_server.add(first, OpenAIReply(tool_calls=[("write_file", {"path": "b.txt"})], chunk_size=2))
    llm = get_chat_model({"model": "test-model", "model_server": openai_server.base_url, "api_key": "k",
                          "generate_cfg": {"retry_delay": 0.01}})  # fmt: skip
    fn = {"name": "write_file", "parameters": {"type": "object", "properties": {"path": {}}}}
    deltas = list(llm.chat([Message("user", "Save.")], [fn], delta_stream=True))
    frags = [f for d in deltas for f in d]
    assert len(openai_server.chat_requests) == 2  # retried: only arguments had been shown
    assert {f.index for f in frags if STREAMING_CALL in (f.extra or {})} == {0, 1}  # the first try showed two calls
    restart = next(i for i, f in enumerate(frags) if f.replace and STREAMING_CALL in (f.extra or {}))
    assert frags[restart].index == 0 and frags[restart].extra[STREAMING_CALL]["name"] == "write_file"
    reply = _merged(deltas)
    assert json.loads(reply[0].function_call.arguments) == {"path": "b.txt"}  # the retry's call, not a mix
    assert [(m.function_call, m.content, m.extra) for m in reply[1:]] == [(None, "", None)]  # the other: emptied


def test_the_event_stream_gives_each_piece_of_a_long_argument_as_a_tool_call_delta(openai_server: Any) -> None:
    _script(openai_server, OpenAIReply)
    written: list[str] = []
    deltas = [ev.data for ev in _agent(_config_openai(openai_server), written).run(USER, events=True)
              if ev.type == "tool_call_delta"]  # fmt: skip
    assert written == [BODY] and len(deltas) > 100  # as the server streamed it, not once at the end
    assert deltas[0]["name"] == "write_file" and deltas[0]["call_id"]
    assert all(d["index"] == deltas[0]["index"] for d in deltas)
    assert json.loads("".join(d["arguments"] for d in deltas)) == ARGS  # the pieces, each once: the call's arguments


def _config_openai(server: Any) -> dict[str, Any]:
    return {"model": "test-model", "model_server": server.base_url, "api_key": "k"}
