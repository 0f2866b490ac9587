"""Model-server faults, end to end: FnCallAgent and Assistant against the loopback OpenAI-compatible server.

Every fault either recovers by a bounded retry or raises a typed error carrying the server's message, in
bounded time; a stream that breaks after text was shown raises (partial=True) instead of ending as if
complete; and nothing logged (at DEBUG, every library) or raised contains the API key.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chatagent import Assistant, FnCallAgent, get_chat_model
from chatagent.errors import ChatAgentError, ModelServiceError, RunDeadlineExceeded
from chatagent.rag import DocStore
from chatagent.schema import to_messages
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.timeout(30)

KEY = "sk-reliability-0123456789abcdef"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
FULL = "The weather in Paris is sunny and warm today."


@pytest.fixture(autouse=True)
def no_key_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every test here runs with every logger at DEBUG, and fails if any record holds the API key."""
    caplog.set_level(logging.DEBUG)
    yield
    leaked = [r.getMessage()[:200] for r in caplog.records if KEY in r.getMessage()]
    assert not leaked, f"the API key was logged: {leaked}"
    assert KEY not in caplog.text


class Weather:
    """A tool that records its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def weather(self, city: str) -> str:
        """Current weather for a city.

        Args:
            city: the city's name
        """
        self.calls.append(city)
        return f"sunny in {city}"


def make_llm(server_url: str, **generate_cfg: object) -> object:
    cfg = {"retry_delay": 0.01, "max_retries": 2, "request_timeout": 5, **generate_cfg}
    return get_chat_model({"model": "m", "model_server": server_url, "api_key": KEY, "generate_cfg": cfg})


def make_agent(kind: str, server_url: str, tmp_path: Path, tool: Weather | None = None, **cfg: object) -> FnCallAgent:
    llm = make_llm(server_url, **cfg)
    tools = [(tool or Weather()).weather]
    if kind == "assistant":
        notes = tmp_path / "notes.txt"
        notes.write_text("Paris weather notes: bring sunglasses.", encoding="utf-8")
        store = DocStore(tmp_path / "ws", disk_cache=False)
        return Assistant(llm=llm, function_list=tools, files=[str(notes)], rag_cfg={"store": store})
    return FnCallAgent(llm=llm, function_list=tools)


def drive(agent: FnCallAgent, stream: bool, **kwargs: object) -> tuple[list | None, BaseException | None, list]:
    """Run the agent: (final answer or None, the exception or None, every yield seen)."""
    seen: list = []
    try:
        if stream:
            for rsp in agent.run(USER, **kwargs):
                seen.append(rsp)
            return seen[-1], None, seen
        return agent.run_nonstream(USER, **kwargs), None, seen
    except Exception as e:  # the test inspects it
        assert KEY not in "".join(traceback.format_exception(e)), "the API key is in the error or its traceback"
        return None, e, seen


# ---- transient faults recover ---------------------------------------------------------------------------------

TRANSIENT = {
    "429-retry-after": Reply(status=429, headers={"Retry-After": "0.05"}, error={"message": "slow down"}),
    "429-no-retry-after": Reply(status=429, error={"message": "rate limited"}),
    "500": Reply(status=500, error={"message": "internal"}),
    "502-html": Reply(status=502, body="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
    "503": Reply(status=503, error={"message": "overloaded"}),
    "empty-choices": Reply(empty_choices=True),
    "drop-before-text": Reply(text=FULL, drop_after=1),
    "malformed-sse-before-text": Reply(text=FULL, malformed_after=1),
    "ended-before-text": Reply(text=FULL, end_after=1),
    "call-dropped-mid-arguments": Reply(
        tool_calls=[("weather", {"city": "Paris, France"})], chunk_size=2, drop_after=5
    ),
}


@pytest.mark.parametrize("kind", ["fncall", "assistant"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("fault", sorted(TRANSIENT))
def test_transient_fault_on_each_model_call_is_retried(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, fault: str, stream: bool, kind: str
) -> None:
    """The fault hits the first call (before the tool) and the second (after it): both recover, the tool runs once.

    run_nonstream streams from the server too (agents always do), so the stream faults apply to it as well."""
    openai_server.add(TRANSIENT[fault], Reply(tool_calls=[("weather", {"city": "Paris"})]), TRANSIENT[fault], FULL)
    tool = Weather()
    final, error, _ = drive(make_agent(kind, openai_server.base_url, tmp_path, tool), stream)
    assert error is None, error
    assert final[-1]["content"] == FULL
    assert tool.calls == ["Paris"]  # never run twice, never run from a broken stream
    assert len(openai_server.chat_requests) == 4
    assert any("retry 1/2" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_retry_after_is_waited_for_and_capped(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.add(Reply(status=429, headers={"Retry-After": "0.4"}), FULL)
    agent = make_agent("fncall", openai_server.base_url, tmp_path, retry_delay=5)
    start = time.monotonic()
    assert drive(agent, True)[0][-1]["content"] == FULL
    assert 0.4 <= time.monotonic() - start < 3
    openai_server.reset()
    openai_server.add(Reply(status=429, headers={"Retry-After": "3600"}), FULL)  # capped by max_retry_wait
    agent = make_agent("fncall", openai_server.base_url, tmp_path, max_retry_wait=0.2)
    start = time.monotonic()
    assert drive(agent, True)[0][-1]["content"] == FULL
    assert time.monotonic() - start < 3


# ---- faults that retrying cannot fix: typed errors with the server's message ------------------------------------


PERSISTENT = [
    # (fault, code, text the error must carry, requests made)
    (Reply(status=500, error={"message": "upstream exploded"}), 500, "upstream exploded", 3),
    (Reply(status=503, body="<html><h1>Service Unavailable</h1></html>", content_type="text/html"), 503, "Unavail", 3),
    (Reply(status=429, error={"message": "quota exhausted"}), 429, "quota exhausted", 3),
    (Reply(empty_choices=True), "empty_response", "no choices", 3),
    (Reply(status=400, error={"message": "temperature must be <= 2"}), 400, "temperature must be", 1),
    (Reply(status=401, error={"message": f"Incorrect API key provided: {KEY}"}), 401, "Incorrect API key", 1),
    (Reply(status=404, error={"message": "model m does not exist"}), 404, "does not exist", 1),
    (Reply(body="<html><body>Welcome to nginx!</body></html>", content_type="text/html"), "bad_response", "nginx", 1),
    (
        Reply(status=400, error={"message": "maximum context length is 8192", "code": "context_length_exceeded"}),
        "context_too_long",
        "8192",
        1,
    ),
]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("fault,code,text,requests", PERSISTENT, ids=[str(p[1]) + "-" + p[2][:12] for p in PERSISTENT])
def test_faults_retrying_cannot_fix_raise_a_typed_error_with_the_servers_message(
    openai_server: OpenAIServer, tmp_path: Path, fault: Reply, code: object, text: str, requests: int, stream: bool
) -> None:
    openai_server.add(*[fault] * requests)
    start = time.monotonic()
    final, error, seen = drive(make_agent("fncall", openai_server.base_url, tmp_path), stream)
    assert final is None and seen == []
    assert isinstance(error, ModelServiceError), error
    assert error.code == code and text in error.message and not error.partial
    assert len(openai_server.chat_requests) == requests  # bounded: 1 + max_retries, or 1 when retrying cannot help
    assert time.monotonic() - start < 5


def test_the_key_echoed_by_the_server_is_masked(openai_server: OpenAIServer, tmp_path: Path) -> None:
    def echo(request: object) -> Reply:  # a proxy that prints the Authorization header it saw
        header = request.headers.get("authorization", "")  # type: ignore[attr-defined]
        return Reply(status=502, body=f"proxy error, Authorization: {header}", content_type="text/plain")

    openai_server.add(echo, echo, echo)
    _, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path), True)
    assert isinstance(error, ModelServiceError) and error.code == 502
    assert "Bearer ***" in str(error) and KEY not in str(error)


# ---- transport faults -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listen queue is full: a connection attempt gets no answer (a connect timeout)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)
    try:
        yield port
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_connect_timeout_is_retried_then_raises_in_bounded_time(tmp_path: Path) -> None:
    with unanswered_port() as port:
        agent = make_agent("fncall", f"http://127.0.0.1:{port}/v1", tmp_path, request_timeout=0.3, max_retries=1)
        start = time.monotonic()
        _, error, _ = drive(agent, True)
    assert isinstance(error, ModelServiceError) and error.code == "timeout" and error.retryable
    assert time.monotonic() - start < 3  # two attempts of 0.3 s, not the SDK's default of minutes


def test_connection_refused_raises_a_typed_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _, error, _ = drive(make_agent("fncall", f"http://127.0.0.1:{port}/v1", tmp_path, max_retries=1), False)
    assert isinstance(error, ModelServiceError) and error.code == "connection_error"
    assert f"127.0.0.1:{port}" in error.message


class RawServer:
    """A tiny HTTP server for faults the loopback server cannot make: each request is read whole, then
    `respond(connection)` writes whatever it likes (and may reset the connection)."""

    def __init__(self, respond: Callable[[socket.socket], None]) -> None:
        self.respond = respond
        self.requests = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, name="raw-fault-server", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                with contextlib.suppress(OSError):
                    self.respond(conn)

    def close(self) -> None:
        self._sock.close()


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def sse_chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def reset(conn: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def test_connection_reset_after_headers_before_text_is_retried(tmp_path: Path) -> None:
    def respond(conn: socket.socket) -> None:
        conn.sendall(SSE_HEAD)
        time.sleep(0.05)
        reset(conn)

    server = RawServer(respond)
    try:
        _, error, seen = drive(make_agent("fncall", server.base_url, tmp_path, max_retries=2), True)
    finally:
        server.close()
    assert isinstance(error, ModelServiceError) and error.retryable and not error.partial
    assert error.code in ("stream_broken", "stream_incomplete")
    assert server.requests == 3 and seen == []


def test_connection_reset_after_text_raises_partial(tmp_path: Path) -> None:
    def respond(conn: socket.socket) -> None:
        conn.sendall(SSE_HEAD + sse_chunk(b'data: {"choices":[{"index":0,"delta":{"content":"The weather"}}]}\n\n'))
        time.sleep(0.05)
        reset(conn)

    server = RawServer(respond)
    try:
        _, error, seen = drive(make_agent("fncall", server.base_url, tmp_path), True)
    finally:
        server.close()
    assert isinstance(error, ModelServiceError) and error.partial and error.code == "stream_broken"
    assert seen[-1][-1]["content"] == "The weather" and server.requests == 1  # shown once, never replayed


# ---- breaks after text was shown: never presented as complete --------------------------------------------------

MID_STREAM = {
    "dropped": (Reply(text=FULL, drop_after=4), "stream_broken"),
    "malformed-sse": (Reply(text=FULL, malformed_after=4), "bad_response"),
    "ended-without-done": (Reply(text=FULL, end_after=4), "stream_incomplete"),
    "read-timeout": (Reply(text=FULL, stall_after=4, stall=3), "timeout"),
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("fault", sorted(MID_STREAM))
def test_a_stream_broken_after_text_raises_partial_and_is_not_replayed(
    openai_server: OpenAIServer, tmp_path: Path, fault: str, stream: bool
) -> None:
    reply, code = MID_STREAM[fault]
    openai_server.add(reply, FULL)
    start = time.monotonic()
    final, error, seen = drive(make_agent("fncall", openai_server.base_url, tmp_path, request_timeout=0.5), stream)
    assert final is None and isinstance(error, ModelServiceError), error
    assert error.partial and error.code == code
    assert len(openai_server.chat_requests) == 1  # the start is not shown twice
    if stream:
        shown = seen[-1][-1]["content"]
        assert shown and FULL.startswith(shown) and shown != FULL
    assert time.monotonic() - start < 5


# ---- the model's own mistakes are fed back ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("kind", ["fncall", "assistant"])
def test_tool_call_with_invalid_json_arguments_is_fed_back(
    openai_server: OpenAIServer, tmp_path: Path, kind: str, stream: bool
) -> None:
    openai_server.add(
        Reply(tool_calls=[("weather", "{{{ city == Paris ]]")]),
        Reply(tool_calls=[("weather", {"city": "Paris"})]),
        FULL,
    )
    tool = Weather()
    final, error, _ = drive(make_agent(kind, openai_server.base_url, tmp_path, tool), stream)
    assert error is None, error
    results = [m for m in final if m["role"] == "function"]
    assert "invalid arguments for weather" in results[0]["content"]
    assert results[1]["content"] == "sunny in Paris" and tool.calls == ["Paris"]
    second = openai_server.chat_requests[1].json["messages"]
    assert any(m["role"] == "tool" and "invalid arguments" in m["content"] for m in second)
    assert final[-1]["content"] == FULL


def test_prompt_based_function_calling_recovers_from_faults_too(openai_server: OpenAIServer, tmp_path: Path) -> None:
    call = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    openai_server.add(Reply(status=503), Reply(text=call), Reply(text="x", drop_after=1), FULL)
    tool = Weather()
    agent = make_agent("fncall", openai_server.base_url, tmp_path, tool, fncall_prompt_type="nous")
    final, error, _ = drive(agent, True)
    assert error is None, error
    assert tool.calls == ["Paris"] and final[-1]["content"] == FULL
    assert "tools" not in openai_server.chat_requests[0].json


# ---- the run deadline bounds model I/O (regression: it used to wait for the server) --------------------------------


@pytest.mark.parametrize("prompted", [False, True], ids=["native", "prompt-based"])
def test_deadline_cuts_a_stalled_stream(openai_server: OpenAIServer, tmp_path: Path, prompted: bool) -> None:
    openai_server.add(Reply(text=FULL, stall_after=2, stall=8))
    cfg = {"request_timeout": None, "fncall_prompt_type": "nous" if prompted else None}
    agent = make_agent("fncall", openai_server.base_url, tmp_path, **cfg)
    start = time.monotonic()
    _, error, _ = drive(agent, True, deadline=0.6)
    assert isinstance(error, RunDeadlineExceeded), error
    assert time.monotonic() - start < 4  # not the 8 s stall, nor the SDK's 10 min timeout


def test_deadline_is_not_waited_past_for_a_retry(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.add(Reply(status=429, headers={"Retry-After": "20"}, error={"message": "slow down"}), FULL)
    start = time.monotonic()
    _, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path), True, deadline=1.0)
    assert isinstance(error, ModelServiceError) and error.code == 429 and "slow down" in error.message
    assert time.monotonic() - start < 5 and len(openai_server.chat_requests) == 1  # not the 20 s wait


def test_deadline_leaves_retries_that_fit(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.add(Reply(status=503), FULL)
    final, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path), True, deadline=5.0)
    assert error is None and final[-1]["content"] == FULL
    assert "deadline" not in openai_server.chat_requests[1].json  # the deadline is ours, not a request field


# ---- replies cut off by max_tokens, and odd characters from the server --------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
def test_a_tool_call_cut_off_by_the_token_limit_is_not_run(
    openai_server: OpenAIServer, tmp_path: Path, stream: bool
) -> None:
    """Regression: a call cut off by max_tokens (finish_reason 'length') was repaired and run with "San Fra"."""
    openai_server.add(Reply(tool_calls=[("weather", '{"city": "San Fra')], finish_reason="length"), FULL)
    tool = Weather()
    _, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path, tool), stream)
    assert tool.calls == []  # "San Fra" is not a city the model asked for
    assert isinstance(error, ModelServiceError) and error.code == "length" and "max_tokens" in error.message
    assert len(openai_server.chat_requests) == 1  # the same request would be cut the same way: not retried


def test_the_model_layer_reports_cut_off_replies_the_same_without_streaming(openai_server: OpenAIServer) -> None:
    llm = make_llm(openai_server.base_url)
    openai_server.add(Reply(tool_calls=[("weather", '{"city": "Par')], finish_reason="length"))
    with pytest.raises(ModelServiceError, match="max_tokens") as info:
        llm.chat(to_messages(USER), functions=[{"name": "weather", "parameters": {}}], stream=False)
    assert info.value.code == "length" and len(openai_server.chat_requests) == 1
    openai_server.add(Reply(text="The weather", finish_reason="length"))
    reply = llm.chat(to_messages(USER), stream=False)
    assert reply[0].content == "The weather" and reply[0].extra["stop_reason"] == "length"


@pytest.mark.parametrize("fmt", ["nous", "qwen"])
def test_a_prompt_based_call_cut_off_by_the_token_limit_is_not_run(
    openai_server: OpenAIServer, tmp_path: Path, fmt: str
) -> None:
    text = {
        "nous": '<tool_call>\n{"name": "weather", "arguments": {"city": "San Fra',
        "qwen": '✿FUNCTION✿: weather\n✿ARGS✿: {"city": "San Fra',
    }[fmt]
    openai_server.add(Reply(text=text, finish_reason="length"), FULL)
    tool = Weather()
    _, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path, tool, fncall_prompt_type=fmt), True)
    assert isinstance(error, ModelServiceError) and error.code == "length" and tool.calls == []


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
def test_a_text_cut_off_by_the_token_limit_says_so(openai_server: OpenAIServer, tmp_path: Path, stream: bool) -> None:
    openai_server.add(Reply(text="The weather in Paris is", finish_reason="length"))
    final, error, _ = drive(make_agent("fncall", openai_server.base_url, tmp_path), stream)
    assert error is None and final[-1]["content"] == "The weather in Paris is"
    assert final[-1]["extra"]["stop_reason"] == "length"  # not presented as a complete answer


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
def test_a_lone_surrogate_escape_from_the_server_does_not_abort_the_answer(tmp_path: Path, stream: bool) -> None:
    """Regression: one lone-surrogate escape (\\ud800) in an event made the whole answer a malformed event."""

    def respond(conn: socket.socket) -> None:
        events = [
            b'data: {"choices":[{"index":0,"delta":{"content":"ab"}}]}\n\n',
            b'data: {"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}\n\n',
            b'data: {"choices":[{"index":0,"delta":{"content":"cd"},"finish_reason":"stop"}]}\n\n',
            b"data: [DONE]\n\n",
        ]
        conn.sendall(SSE_HEAD + b"".join(sse_chunk(e) for e in events) + sse_chunk(b""))

    def respond_once(conn: socket.socket) -> None:
        body = (
            b'{"choices":[{"index":0,"message":{"role":"assistant","content":"ab\\udc80cd"},"finish_reason":"stop"}]}'
        )
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        conn.sendall(head + body)

    server = RawServer(respond if stream else respond_once)
    try:
        final, error, _ = drive(make_agent("fncall", server.base_url, tmp_path, max_retries=0), stream)
    finally:
        server.close()
    assert error is None and final[-1]["content"] == "ab\ufffdcd"


def test_every_error_raised_here_is_a_chatagent_error(openai_server: OpenAIServer, tmp_path: Path) -> None:
    """A sweep of every scripted fault with retries off: nothing but ChatAgentError escapes."""
    faults = [r for r in TRANSIENT.values()] + [p[0] for p in PERSISTENT] + [r for r, _ in MID_STREAM.values()]
    agent = make_agent("fncall", openai_server.base_url, tmp_path, max_retries=0, request_timeout=0.5)
    for fault in faults:
        openai_server.reset()
        openai_server.add(fault, Reply(tool_calls=[("weather", {"city": "Paris"})]), fault, FULL)
        for stream in (True, False):
            _, error, _ = drive(agent, stream)
            assert error is None or isinstance(error, ChatAgentError), (fault, error)


# ---- the native DashScope backend keeps the same promises ------------------------------------------------------------


@pytest.mark.timeout(30)
def test_dashscope_backend_faults_are_typed_bounded_and_never_show_the_key(tmp_path: Path) -> None:
    from tests.support.dashscope_server import DashScopeServer
    from tests.support.dashscope_server import Reply as DSReply

    with DashScopeServer().start() as server:
        cfg = {"retry_delay": 0.01, "max_retries": 1}
        llm = get_chat_model(
            {"model": "qwen-plus", "model_server": "dashscope", "base_url": server.base_url, "api_key": KEY,
             "generate_cfg": cfg}
        )  # fmt: skip
        bot = FnCallAgent(llm=llm, function_list=[Weather().weather])
        cases = [
            ([DSReply(status=500), FULL], None),
            ([DSReply(status=429, code="Throttling.RateQuota", headers={"Retry-After": "0.05"}), FULL], None),
            ([DSReply(status=401, code="InvalidApiKey")], "InvalidApiKey"),
            ([DSReply(status=502, body=f"<html>proxy saw {KEY}</html>")] * 2, 502),
        ]
        for stream in (True, False):
            for replies, code in cases:
                server.reset()
                server.add(*replies)
                final, error, _ = drive(bot, stream)
                if code is None:
                    assert error is None and final[-1]["content"] == FULL
                else:
                    assert isinstance(error, ModelServiceError) and KEY not in str(error)
                    assert str(error.code) == str(code)  # DashScope gives an HTTP status as a str, OpenAI as an int
        server.reset()
        server.add(DSReply(text=FULL, interval=3))
        start = time.monotonic()
        _, error, _ = drive(bot, True, deadline=0.8)
        assert isinstance(error, RunDeadlineExceeded) and time.monotonic() - start < 4


@pytest.mark.timeout(30)
def test_dashscope_replies_cut_off_by_the_token_limit(tmp_path: Path) -> None:
    """Regression: a tool call cut off by max_tokens was repaired and run; a cut text looked complete."""
    from tests.support.dashscope_server import DashScopeServer
    from tests.support.dashscope_server import Reply as DSReply

    with DashScopeServer().start() as server:
        llm = get_chat_model(
            {"model": "qwen-plus", "model_server": "dashscope", "base_url": server.base_url, "api_key": KEY}
        )
        tool = Weather()
        bot = FnCallAgent(llm=llm, function_list=[tool.weather])
        for stream in (True, False):
            server.reset()
            server.add(DSReply(tool_calls=[("weather", '{"city": "San Fra')], finish_reason="length"))
            _, error, _ = drive(bot, stream)
            assert isinstance(error, ModelServiceError) and error.code == "length" and tool.calls == []
            server.reset()
            server.add(DSReply(text="The weather in", finish_reason="length"))
            final, error, _ = drive(bot, stream)
            assert error is None and final[-1]["extra"]["stop_reason"] == "length"
        server.reset()
        server.add(DSReply(tool_calls=[("weather", '{"city": "Par')], finish_reason="length"))
        with pytest.raises(ModelServiceError, match="max_tokens"):
            llm.chat(to_messages(USER), functions=[{"name": "weather", "parameters": {}}], stream=False)
        server.add(DSReply(text="The weather", finish_reason="length"))
        assert llm.chat(to_messages(USER), stream=False)[0].extra["stop_reason"] == "length"
        prompted = get_chat_model(
            {"model": "qwen-plus", "model_server": "dashscope", "base_url": server.base_url, "api_key": KEY,
             "generate_cfg": {"fncall_prompt_type": "nous"}}
        )  # fmt: skip
        bot = FnCallAgent(llm=prompted, function_list=[tool.weather])
        server.reset()
        server.add(
            DSReply(text='<tool_call>\n{"name": "weather", "arguments": {"city": "San Fra', finish_reason="length")
        )
        _, error, _ = drive(bot, True)
        assert isinstance(error, ModelServiceError) and error.code == "length" and tool.calls == []
        server.add(DSReply(text="Prompted and cut", finish_reason="length"))
        final, error, _ = drive(bot, False)
        assert error is None and final[-1] == {
            "role": "assistant",
            "content": "Prompted and cut",
            "extra": {"stop_reason": "length"},
        }
