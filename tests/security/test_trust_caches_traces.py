"""Attacks through what chatagent remembers and reports (issue 24 items 11, 14): the response cache answering one
server's or one key's question with another's answer, and traces carrying user content in error texts."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatagent import BasicAgent, FnCallAgent, ModelServiceError, get_chat_model, tool
from tests.run.test_telemetry import spans  # noqa: F401  (the spans recorded in memory)
from tests.support.openai_server import Reply

pytestmark = pytest.mark.timeout(120)

ASK = [{"role": "user", "content": "What is our revenue?"}]


def answer(cfg: dict) -> str:
    return BasicAgent(llm=get_chat_model(cfg)).run_nonstream(ASK)[-1]["content"]


def test_the_response_cache_keeps_servers_and_keys_apart(openai_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = {"cache": f"sqlite:///{tmp_path}/answers.db", "temperature": 0}
    one = openai_server.base_url
    other = one.replace("127.0.0.1", "localhost")  # the same loopback server under another name: another endpoint
    openai_server.add("Tenant A's revenue is 1M.")
    openai_server.add("Tenant B's revenue is 2M.")
    openai_server.add("Unauthorised.")
    assert (
        answer({"model": "m", "api_base": one, "api_key": "key-a", "generate_cfg": cache})
        == "Tenant A's revenue is 1M."
    )
    assert (
        answer({"model": "m", "base_url": other, "api_key": "key-a", "generate_cfg": cache})
        == "Tenant B's revenue is 2M."
    )
    assert answer({"model": "m", "api_base": one, "api_key": "revoked", "generate_cfg": cache}) == "Unauthorised."
    assert len(openai_server.requests) == 3
    assert (
        answer({"model": "m", "api_base": one, "api_key": "key-a", "generate_cfg": cache})
        == "Tenant A's revenue is 1M."
    )
    assert len(openai_server.requests) == 3  # the same endpoint and key: from the cache


def test_traces_without_capture_content_carry_no_user_content(spans: InMemorySpanExporter, openai_server) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    @tool
    def lookup(account: str) -> str:
        """Look an account up."""
        raise KeyError(f"no account {account}")

    secret = "IBAN DE89370400440532013000"
    openai_server.add(Reply(tool_calls=[("lookup", {"account": secret})]))
    openai_server.add("Not found.")
    openai_server.add(Reply(status=400, error={"message": f"your prompt '{secret}' was flagged", "code": "flagged"}))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    FnCallAgent(llm=llm, function_list=[lookup]).run_nonstream([{"role": "user", "content": f"Check {secret}"}])
    with pytest.raises(ModelServiceError):
        BasicAgent(llm=llm).run_nonstream([{"role": "user", "content": f"Check {secret}"}])
    failed = [s for s in spans.get_finished_spans() if s.status.status_code.name == "ERROR"]
    assert {s.name.split()[0] for s in failed} >= {"execute_tool", "chat"}
    for s in spans.get_finished_spans():
        assert secret not in str(s.status.description) and secret not in str(dict(s.attributes or {}))
        for e in s.events:
            assert secret not in str(dict(e.attributes or {}))
