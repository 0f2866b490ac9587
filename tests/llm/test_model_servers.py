"""Which backend a config builds: named servers ('anthropic', 'gemini', 'bedrock', ...), URLs, and a name that is
neither refused when the model is built, not at its first call."""

from __future__ import annotations

import pytest

from chatagent import get_chat_model


@pytest.mark.parametrize(
    ("server", "backend"),
    [("anthropic", "AnthropicModel"), ("openai", "OpenAICompatModel"), ("http://127.0.0.1:9/v1", "OpenAICompatModel")],
)
def test_a_named_server_builds_its_backend(server: str, backend: str) -> None:
    assert type(get_chat_model({"model": "m", "model_server": server})).__name__ == backend


def test_an_unknown_server_name_is_refused_when_built_naming_the_known_ones() -> None:
    with pytest.raises(ValueError) as e:
        get_chat_model({"model": "claude-sonnet-4", "model_server": "antropic"})
    assert "'antropic'" in str(e.value) and "anthropic" in str(e.value) and "bedrock" in str(e.value)


def test_a_server_name_of_another_type_is_refused() -> None:
    with pytest.raises(ValueError, match="model_type is 'oai'"):
        get_chat_model({"model_type": "oai", "model": "claude-sonnet-4", "model_server": "anthropic"})


def test_the_anthropic_server_is_the_api_unless_a_url_or_the_environment_says_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert (
        get_chat_model({"model": "claude-sonnet-4-5", "model_server": "anthropic"}).base_url
        == "https://api.anthropic.com"
    )
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    assert get_chat_model({"model_type": "anthropic", "model": "claude-sonnet-4-5"}).base_url == "http://127.0.0.1:9"


def test_a_backend_built_directly_refuses_a_name_that_is_not_its_own() -> None:
    from chatagent.llm.anthropic.model import AnthropicModel

    with pytest.raises(ValueError, match="neither a URL"):
        AnthropicModel({"model": "claude-sonnet-4-5", "model_server": "claude"})
