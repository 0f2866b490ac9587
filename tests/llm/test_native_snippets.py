"""The README's tool and structured-output snippets, as written, on each native backend against its loopback
server (the backend made the default model), streaming, with usage and cost."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chatagent.llm import registry
from tests.support.provider_reply import Reply

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
TOOL_SNIPPET = next(b for b in BLOCKS if "FnCallAgent(function_list=[get_weather])" in b)
STRUCTURED_SNIPPET = next(b for b in BLOCKS if "response_format=City" in b)
PROVIDERS = ["anthropic", "gemini", "bedrock", "responses"]


def _config(provider: str, request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    server = request.getfixturevalue(f"{provider}_server")
    if provider == "anthropic":
        return server, {"model_type": "anthropic", "model": "claude-sonnet-4-5", "model_server": server.base_url,
                        "api_key": server.api_key}  # fmt: skip
    if provider == "gemini":
        return server, {"model_type": "gemini", "model": "gemini-2.5-flash", "model_server": server.base_url,
                        "api_key": server.api_key}  # fmt: skip
    if provider == "bedrock":
        return server, {"model_type": "bedrock", "model": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
                        "model_server": server.base_url, "region": server.region}  # fmt: skip
    return server, {"model_type": "oai", "api": "responses", "model": "gpt-5-mini", "model_server": server.base_url,
                    "api_key": server.api_key}  # fmt: skip


def _run(snippet: str, monkeypatch: pytest.MonkeyPatch, cfg: dict[str, Any]) -> dict[str, Any]:
    monkeypatch.setattr(registry, "default_llm_config", lambda: dict(cfg))
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102 (the README's own code)
    return namespace


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_readme_tool_snippet_runs_on_each_native_backend(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    server, cfg = _config(provider, request)
    server.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})], chunk_size=3), Reply(text="It is sunny in Paris.")
    )
    namespace = _run(TOOL_SNIPPET, monkeypatch, cfg)
    assert capsys.readouterr().out.strip() == "It is sunny in Paris."
    assert len(server.requests) == 2 and all(r.json is not None for r in server.requests)
    bot = namespace["bot"]
    server.add(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]), Reply(text="Sunny in Oslo."))
    run = bot.run([{"role": "user", "content": "Weather in Oslo?"}])
    yields = list(run)
    assert len(yields) > 2 and yields[-1][-1]["content"] == "Sunny in Oslo."  # streamed
    assert run.usage.calls == 2 and run.usage.prompt_tokens > 0 and run.usage.cost is not None and run.usage.cost > 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_readme_structured_output_snippet_runs_natively_on_each_backend(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    server, cfg = _config(provider, request)
    answer = {"name": "Tokyo", "population": 37400000}
    forced = provider in ("anthropic", "bedrock")  # the schema goes as a forced tool there
    server.add(
        Reply(tool_calls=[("City", answer)]) if forced else Reply(text='{"name": "Tokyo", "population": 37400000}')
    )
    namespace = _run(STRUCTURED_SNIPPET, monkeypatch, cfg)
    assert capsys.readouterr().out.strip() == "Tokyo 37400000"
    body = server.requests[0].json
    sent = str(body)
    assert "population" in sent and ("tool" in sent or "responseSchema" in sent or "json_schema" in sent)
    bot = namespace["BasicAgent"](llm=cfg)
    server.add(
        Reply(tool_calls=[("City", answer)]) if forced else Reply(text='{"name": "Tokyo", "population": 37400000}')
    )
    run = bot.run([{"role": "user", "content": "Largest city in Japan?"}], response_format=namespace["City"])
    *_, last = run
    assert last[-1]["extra"]["response_format"] == {"name": "City", "attempts": 1, "path": "native", "valid": True}
    assert run.usage.cost is not None and run.usage.cost > 0


MODELS_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
NATIVE_PART = MODELS_PAGE.split("## Native backends", 1)[1].split("\n## ", 1)[0]
DOC_BLOCKS = dict(zip(PROVIDERS, re.findall(r"```python\n(.*?)```", NATIVE_PART, re.S), strict=True))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_models_page_snippet_of_each_native_backend_runs(
    provider: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    server = request.getfixturevalue(f"{provider}_server")
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        server.add(Reply(thinking="Weather first.", tool_calls=[("get_weather", {"city": "Paris"})]),
                   Reply(text="Sunny in Paris."))  # fmt: skip
    elif provider == "gemini":
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", server.api_key)
        server.add(Reply(thinking="7 * 11 * 13", text="No: 7 x 11 x 13."))
    elif provider == "bedrock":
        monkeypatch.setattr(server, "region", "us-east-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.base_url)
        server.add(Reply(text="Hi!"))
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        server.add(Reply(thinking="Greet.", text="Hi!"))
    exec(compile(DOC_BLOCKS[provider], "docs/models.md", "exec"), {"__name__": "__snippet__"})  # noqa: S102
    out = capsys.readouterr().out
    expected = {"anthropic": "Sunny in Paris.", "gemini": "No: 7 x 11 x 13.", "bedrock": "Hi!", "responses": "Hi!"}
    assert expected[provider] in out and server.requests
