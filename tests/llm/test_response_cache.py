"""The response cache: an identical call with deterministic settings is answered from SQLite or a directory,
streamed in the same pieces, without reaching the server."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import BasicAgent, FnCallAgent, get_chat_model, tool
from tests.support.openai_server import Reply

USER = [{"role": "user", "content": "Tell me about caching."}]
TEXT = "Caching stores answers so that the same question costs nothing the second time."


def model(server, **generate_cfg):
    return get_chat_model({"model": "m", "model_server": server.base_url, "api_key": "k", "generate_cfg": generate_cfg})


def deltas(llm, messages=USER, **kw):
    return list(llm.chat(messages, stream=True, delta_stream=True, **kw))  # dicts in, dicts out


@pytest.fixture(params=["sqlite", "directory"])
def cache_spec(request, tmp_path):
    return f"sqlite:///{tmp_path}/cache.db" if request.param == "sqlite" else str(tmp_path / "replies")


def test_a_deterministic_call_is_answered_again_from_the_cache_in_the_same_pieces(openai_server, cache_spec):
    openai_server.add(Reply(text=TEXT, chunk_size=5))
    llm = model(openai_server, temperature=0, cache=cache_spec)
    first = deltas(llm)
    second = deltas(llm)  # the server has nothing more queued: a second request would fail
    assert len(openai_server.requests) == 1
    assert second == first and len(first) == len(TEXT) // 5 + 1
    again = model(openai_server, temperature=0, cache=cache_spec)  # a new model object, the same place
    assert deltas(again) == first and len(openai_server.requests) == 1


def test_sampling_settings_are_not_cached_unless_asked(openai_server, tmp_path):
    spec = str(tmp_path / "c")
    openai_server.add(Reply(text="one", repeat=True))
    llm = model(openai_server, cache=spec)  # the server's default temperature samples
    deltas(llm), deltas(llm)
    assert len(openai_server.requests) == 2
    llm = model(openai_server, cache=spec, temperature=0.7, cache_nondeterministic=True)
    deltas(llm), deltas(llm)
    assert len(openai_server.requests) == 3
    llm = model(openai_server, cache=spec, top_k=1)
    deltas(llm), deltas(llm)
    assert len(openai_server.requests) == 4
    assert all("cache" not in r.json and "cache_nondeterministic" not in r.json for r in openai_server.requests)


def test_other_input_or_settings_miss(openai_server, tmp_path):
    openai_server.add(Reply(text="x", repeat=True))
    llm = model(openai_server, temperature=0, cache=str(tmp_path / "c"))
    deltas(llm)
    deltas(llm, [{"role": "user", "content": "Something else."}])
    deltas(llm, extra_generate_cfg={"max_tokens": 10})
    deltas(llm, functions=[{"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}])
    assert len(openai_server.requests) == 4
    deltas(llm, extra_generate_cfg={"max_retries": 9, "request_timeout": 30})  # do not change the answer: a hit
    assert len(openai_server.requests) == 4


def test_an_agent_run_with_tools_is_replayed_whole(openai_server, tmp_path):
    calls = []

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        calls.append(word)
        return "a store of answers"

    openai_server.add(Reply(tool_calls=[("lookup", {"word": "cache"})]))
    openai_server.add(Reply(text=TEXT))
    cfg = {"cache": f"sqlite:///{tmp_path}/c.db", "temperature": 0}
    bot = FnCallAgent(llm=model(openai_server), function_list=[lookup], generate_cfg=cfg)
    first = list(bot.run(USER))
    run = bot.run(USER)
    second = list(run)
    assert second == first and len(openai_server.requests) == 2
    assert calls == ["cache", "cache"]  # tools still run: only model calls are cached
    assert run.usage.total_tokens == 0 and run.usage.calls == 0


def test_stopped_or_failed_calls_store_nothing(openai_server, tmp_path):
    llm = model(openai_server, temperature=0, cache=str(tmp_path / "c"))
    openai_server.add(Reply(text=TEXT, chunk_size=3))
    stream = llm.chat(USER, stream=True, delta_stream=True)
    next(stream), next(stream)
    stream.close()
    openai_server.add(Reply(text=TEXT, drop_after=3))
    with pytest.raises(Exception):  # noqa: B017 (whatever the dropped stream raises)
        deltas(llm, extra_generate_cfg={"max_retries": 0})
    openai_server.add(Reply(text="fresh"))
    assert "".join(f["content"] for p in deltas(llm) for f in p) == "fresh"


def test_arun_and_achat_use_the_cache_too(openai_server, tmp_path):
    openai_server.add(Reply(text=TEXT))
    cfg = {"cache": str(tmp_path / "c"), "temperature": 0}
    bot = BasicAgent(llm=model(openai_server), generate_cfg=cfg)

    async def main():
        first = [r async for r in bot.arun(USER)]
        second = [r async for r in bot.arun(USER)]
        return first, second

    first, second = asyncio.run(main())
    assert first == second and len(openai_server.requests) == 1
    assert list(bot.run(USER)) == first  # and the sync path finds what the async one stored


def test_qwen_agents_cache_dir_and_bad_places(openai_server, tmp_path):
    openai_server.add(Reply(text=TEXT))
    llm = get_chat_model(
        {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "cache_dir": str(tmp_path / "q"),
         "generate_cfg": {"temperature": 0}}
    )  # fmt: skip
    assert deltas(llm) == deltas(llm) and len(openai_server.requests) == 1
    for bad in ("mysql://x/y", "sqlite://host/x.db", "sqlite:///:memory:"):
        with pytest.raises(ValueError, match="bad cache URL"):
            deltas(model(openai_server, temperature=0, cache=bad))
    with pytest.raises(ValueError, match="must be 'sqlite:///file.db' or a directory"):
        deltas(model(openai_server, temperature=0, cache=42))
