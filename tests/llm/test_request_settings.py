"""One set of settings across providers: `run(seed=...)` reaches the model, the settings are checked where the
model is built, and each backend maps them (the per-provider tests check each protocol's fields)."""

from __future__ import annotations

import pytest

from chatagent import BasicAgent, ScriptedLLM, get_chat_model
from chatagent.llm import request_options
from tests.support.anthropic_server import AnthropicServer
from tests.support.openai_server import OpenAIServer
from tests.support.provider_reply import Reply


def test_run_seed_reaches_the_request(openai_server: OpenAIServer) -> None:
    openai_server.add("ok", "ok")
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    bot = BasicAgent(llm=llm)
    bot.run_nonstream([{"role": "user", "content": "hi"}], seed=42)
    bot.run_nonstream([{"role": "user", "content": "hi"}])
    first, second = (r.json for r in openai_server.chat_requests)
    assert first["seed"] == 42 and "seed" not in second


def test_run_seed_must_be_an_integer() -> None:
    with pytest.raises(ValueError, match="seed"):
        BasicAgent(llm=ScriptedLLM(["x"])).run_nonstream([{"role": "user", "content": "hi"}], seed="7")


def test_run_seed_is_said_where_the_api_has_none(anthropic_server: AnthropicServer, caplog, monkeypatch) -> None:
    monkeypatch.setattr(request_options, "_noticed", set())  # said once per process: another test may have said it
    anthropic_server.add(Reply(text="ok"))
    llm = {"model_type": "anthropic", "model": "claude-haiku-4-5", "model_server": anthropic_server.base_url,
           "api_key": anthropic_server.api_key}  # fmt: skip
    with caplog.at_level("WARNING", "chatagent.llm"):
        BasicAgent(llm=llm).run_nonstream([{"role": "user", "content": "hi"}], seed=42)
    assert "seed" not in anthropic_server.requests[0].json and "no seed" in caplog.text


@pytest.mark.parametrize("effort", ["extreme", -1, 1.5])
def test_a_bad_reasoning_effort_is_refused_when_the_model_is_built(effort: object) -> None:
    with pytest.raises(ValueError, match="reasoning_effort"):
        get_chat_model(
            {"model_type": "anthropic", "model": "claude-sonnet-4-5", "generate_cfg": {"reasoning_effort": effort}}
        )
