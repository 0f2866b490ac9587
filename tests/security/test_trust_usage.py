"""Usage and costs as a model server reports them (issue 36, item 16), attacked over `chatagent serve` with a
loopback model server that lies: before the fix a negative report made the run's cost negative
(`usage.cost = -8.1`) and an absurd one billed 750,000,000 USD. Only bounded non-negative integers are taken; any
other report is estimated from the text, and logged."""

from __future__ import annotations

import json

import httpx
import pytest

from chatagent import BasicAgent
from chatagent.server.runner import AgentServer
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "reported",
    [
        {"prompt_tokens": -3_240_000, "completion_tokens": 0},
        {"prompt_tokens": 750_000_000_000, "completion_tokens": 5},
        {"prompt_tokens": "12", "completion_tokens": 1e300},
        {"prompt_tokens": 12, "completion_tokens": True},
    ],
    ids=["negative", "absurd", "not integers", "a boolean"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_lying_usage_report_never_makes_costs_negative_or_absurd(
    openai_server: OpenAIServer, reported: dict, stream: bool, caplog
) -> None:
    openai_server.add(Reply(text="Hello there.", usage=reported))
    llm = {"model": "gpt-4o-mini", "model_server": openai_server.base_url, "api_key": "k",
           "generate_cfg": {"max_retries": 0}}  # fmt: skip
    with AgentServer(BasicAgent(llm=llm, name="b"), "127.0.0.1", 0) as server:
        body = {"model": "b", "messages": [{"role": "user", "content": "hi"}], "stream": stream,
                "stream_options": {"include_usage": True}}  # fmt: skip
        response = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)
    assert response.status_code == 200
    if stream:
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: {")]
        usage = json.loads(events[-1])["usage"]
    else:
        usage = response.json()["usage"]
    assert 0 < usage["prompt_tokens"] < 1000 and 0 < usage["completion_tokens"] < 1000, usage  # estimated
    assert 0 <= usage["cost"] < 0.01, usage
    assert any("reported a usage that cannot be right" in r.getMessage() for r in caplog.records)
