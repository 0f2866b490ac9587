"""API keys never reach an error, a log line or a response: cleaned when configured, masked everywhere else.

The attack: a key read from a file ends in a newline; the HTTP client refuses the header and quotes it
(`Illegal header value b'Bearer sk-...\\n'`), and the old masking, which matched only the exact key, let it
through to the exception, the retry warnings, the server's 502 body and the web page.
"""

from __future__ import annotations

import logging

import httpx
import pytest

from chatagent import AgentServer, BasicAgent, ModelServiceError, get_chat_model
from chatagent.gui.render import message_text, render_error
from chatagent.utils.keys import MaskSecretsFilter, clean_api_key, mask_secrets

SECRET = "sk-live-9f8e7d6c5b4a3210zyxw"
FAST = {"retry_delay": 0.001, "max_retries": 1}


def leaks(text: str, secret: str = SECRET) -> list[str]:
    """Every run of 8 characters of `secret` found in `text`."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # every logger, ours and the libraries'
    return caplog


def test_a_key_with_a_trailing_newline_works_and_leaks_nowhere(openai_server, all_logs) -> None:
    openai_server.add("hello")
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": SECRET + "\n", "generate_cfg": FAST}
    out = BasicAgent(llm=llm).run_nonstream([{"role": "user", "content": "hi"}])
    assert out[-1]["content"] == "hello"
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert leaks(all_logs.text) == []


@pytest.mark.parametrize("bad", ["sk-live 1234", "sk-live\n1234", "sk-liveé1234"])
def test_a_key_no_header_can_carry_is_refused_when_configured_without_echoing_it(bad: str) -> None:
    with pytest.raises(ValueError, match="position 8 of 12") as info:
        get_chat_model({"model": "m", "model_server": "http://127.0.0.1:9/v1", "api_key": bad})
    assert "1234" not in str(info.value)
    assert clean_api_key("  EMPTY \n") == "EMPTY" and clean_api_key(" \n") is None


def test_masking_catches_pieces_escapes_and_bearer_headers() -> None:
    clean_api_key(SECRET)
    assert leaks(mask_secrets(f"Illegal header value b'Bearer {SECRET}\\n'")) == []
    assert leaks(mask_secrets(f"key={SECRET[3:20]}...")) == []  # a cut piece of it
    assert mask_secrets("Authorization: Bearer abc.def-ghi") == "Authorization: Bearer ***"
    assert mask_secrets("a harmless message") == "a harmless message"
    assert mask_secrets("x sk-other-secret-1 y", ["sk-other-secret-1"]) == "x *** y"


def test_a_credential_header_with_a_newline_is_cleaned_too(openai_server, all_logs) -> None:
    openai_server.add("hello")
    header = {"Authorization": f"Bearer {SECRET}\n"}
    llm = get_chat_model(
        {"model": "m", "model_server": openai_server.base_url, "generate_cfg": {**FAST, "extra_headers": header}}
    )
    assert BasicAgent(llm=llm).run_nonstream([{"role": "user", "content": "hi"}])[-1]["content"] == "hello"
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert leaks(all_logs.text) == []


def test_a_key_quoted_back_by_the_server_is_masked_in_the_error_logs_response_and_page(openai_server, all_logs) -> None:
    """OpenAI quotes the start and end of a wrong key; a proxy may quote the header it got."""
    from tests.support.openai_server import Reply

    quoted = f"Incorrect API key provided: {SECRET[:12]}****{SECRET[-4:]}; header was 'Bearer {SECRET}'"
    openai_server.add(Reply(status=401, error={"message": quoted}, repeat=True))
    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": SECRET, "generate_cfg": FAST}
    agent = BasicAgent(llm=llm)
    with pytest.raises(ModelServiceError) as info:
        agent.run_nonstream([{"role": "user", "content": "hi"}])
    assert "Incorrect API key provided" in str(info.value) and leaks(str(info.value)) == []
    assert leaks(message_text(render_error(info.value))) == []
    with AgentServer(agent, port=0) as server:
        response = httpx.post(
            server.url + "/chat/completions",
            json={"model": server.model_name, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
    assert response.status_code == 502 and "Incorrect API key provided" in response.text
    assert leaks(response.text) == []
    assert "Incorrect API key provided" in all_logs.text and leaks(all_logs.text) == []


def test_the_log_filter_masks_messages_and_tracebacks() -> None:
    clean_api_key(SECRET)
    try:
        raise RuntimeError(f"upstream said {SECRET}")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed with %s", (SECRET,), None)
        import sys

        record.exc_info = sys.exc_info()
    MaskSecretsFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert "failed with ***" in formatted and "RuntimeError" in formatted and leaks(formatted) == []


def test_the_server_key_is_stripped(openai_server) -> None:
    with AgentServer(BasicAgent(llm={"model_type": "scripted", "replies": ["x"]}), port=0, api_key="k-123456\n") as s:
        ok = httpx.get(s.url + "/models", headers={"Authorization": "Bearer k-123456"}, timeout=10)
        bad = httpx.get(s.url + "/models", headers={"Authorization": "Bearer k-1234567"}, timeout=10)
    assert ok.status_code == 200 and bad.status_code == 401


def test_keys_that_share_characters_are_masked_whole() -> None:
    """Masking key by key, a longer key sharing a run with a shorter one left a piece of the shorter in the text."""
    longer, shorter = "sk-shared-run-0123456789", "sk-shared-run-ABCDEF"
    text = f"a {shorter} b {longer} c"
    assert mask_secrets(text, [longer, shorter]) == "a *** b *** c"
    assert mask_secrets(text, [shorter, longer]) == "a *** b *** c"
