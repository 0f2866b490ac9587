"""Reliability under faults, hostile input and load, counted by actually running each case.

    .venv/bin/python bench/reliability.py [--quick]

(a) model-server faults: each fault of the loopback OpenAI-compatible server (and a raw socket server for
    TCP resets and a full listen queue for connect timeouts) is injected into a FnCallAgent run, streaming
    and not. Survived = the run recovered with the right answer, or raised a ChatAgentError carrying the
    server's message (partial=True if text had been shown), within its time bound, with the API key in no
    log record (all loggers at DEBUG) and no error text.
(b) hostile input: random message shapes, random tool names and arguments from the model, text with NUL
    bytes and lone surrogates sent to the loopback server, hostile file paths and randomly damaged
    PDF/DOCX/XLSX/HTML/CSV files. Handled = a typed error naming the problem, or a function message the
    model can read; never another exception.
(c) concurrency: 50 threads on one agent instance, with ScriptedLLM and over HTTP, and 50 threads asking one
    Assistant about one new file. Clean = every conversation got its own answer, no exception, one parse.

Prints a table, then `name: value` lines.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import random
import socket
import struct
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chatagent import Assistant, FnCallAgent, ScriptedLLM, get_chat_model, tool_call  # noqa: E402
from chatagent.errors import ChatAgentError, ModelServiceError  # noqa: E402
from chatagent.llm import retry  # noqa: E402
from chatagent.llm.scripted import Reply as ScriptReply  # noqa: E402
from chatagent.schema import FunctionCall, MessageError  # noqa: E402
from tests.support.openai_server import OpenAIServer, Reply  # noqa: E402

KEY = "sk-bench-reliability-0123456789"
USER = [{"role": "user", "content": "Weather in Paris?"}]
ANSWER = "It is sunny in Paris today, as the tool said."


def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city
    """
    return f"sunny in {city}"


class LogTrap(logging.Handler):
    """Keeps every record's text, to look for the key."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.text = io.StringIO()

    def emit(self, record: logging.LogRecord) -> None:
        self.text.write(record.getMessage() + "\n")


# ---- (a) faults -----------------------------------------------------------------------------------------------------


def _raw_server(respond: Callable[[socket.socket], None]) -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                respond(conn)

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _reset_after(text: bytes) -> Callable[[socket.socket], None]:
    def respond(conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        event = b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % text if text else b""
        conn.sendall(head + (b"%x\r\n%s\r\n" % (len(event), event) if event else b""))
        time.sleep(0.02)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    return respond


def _lone_surrogate_answer(conn: socket.socket) -> None:
    """An answer with a lone surrogate escape, as a server that split a character between tokens sends."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    events = [b'data: {"choices":[{"index":0,"delta":{"content":"ab\\ud800cd"},"finish_reason":"stop"}]}\n\n',
              b"data: [DONE]\n\n"]  # fmt: skip
    conn.sendall(head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n")


def fault_cases() -> list[tuple[str, list, str, float]]:
    """(name, replies to queue, what must happen: 'recover' | 'error' | 'partial', time bound in s)."""
    call = Reply(tool_calls=[("weather", {"city": "Paris"})])
    transient = {
        "429 Retry-After": Reply(status=429, headers={"Retry-After": "0.05"}),
        "429": Reply(status=429),
        "500": Reply(status=500),
        "502 HTML": Reply(status=502, body="<html><h1>Bad Gateway</h1></html>", content_type="text/html"),
        "503": Reply(status=503),
        "empty choices": Reply(empty_choices=True),
        "drop before text": Reply(text=ANSWER, drop_after=1),
        "malformed SSE before text": Reply(text=ANSWER, malformed_after=1),
        "no [DONE] before text": Reply(text=ANSWER, end_after=1),
        "slow first byte": Reply(text=ANSWER, delay=1.0),
        "call dropped mid-arguments": Reply(
            tool_calls=[("weather", {"city": "Paris, France"})], chunk_size=2, drop_after=5
        ),
    }
    cases = [(f"{k} (x2, recovers)", [v, call, v, ANSWER], "recover", 5.0) for k, v in transient.items()]
    persistent = {
        "500 x3": Reply(status=500, error={"message": "upstream exploded"}),
        "400": Reply(status=400, error={"message": "bad temperature"}),
        "401 echoing the key": Reply(status=401, error={"message": f"Incorrect API key provided: {KEY}"}),
        "404": Reply(status=404, error={"message": "no such model"}),
        "HTML 200": Reply(body="<html>Welcome to nginx!</html>", content_type="text/html"),
        "context too long": Reply(
            status=400, error={"message": "maximum context length", "code": "context_length_exceeded"}
        ),
        "bad tool JSON": None,
    }
    for k, v in persistent.items():
        if v is None:
            cases.append((k, [Reply(tool_calls=[("weather", "{{{ city: ]")]), call, ANSWER], "recover", 5.0))
        else:
            cases.append((k, [v] * 3, "error", 5.0))
    cut = Reply(tool_calls=[("weather", '{"city": "San Fra')], finish_reason="length")
    cases.append(("tool call cut by max_tokens", [cut, ANSWER], "error", 5.0))  # never run with "San Fra"
    for k, v in {
        "drop after text": Reply(text=ANSWER, drop_after=4),
        "malformed SSE after text": Reply(text=ANSWER, malformed_after=4),
        "no [DONE] after text": Reply(text=ANSWER, end_after=4),
        "read timeout after text": Reply(text=ANSWER, stall_after=4, stall=3),
    }.items():
        cases.append((k, [v, ANSWER], "partial", 5.0))
    return cases


def run_faults(log: LogTrap) -> tuple[int, int, list[str]]:
    injected = survived = 0
    failures: list[str] = []

    def check(name: str, stream: bool, url: str, expect: str, bound: float, answer: str = ANSWER) -> None:
        nonlocal injected, survived
        injected += 1
        # each case is its own backend: one server's shared retry budget (llm/retry.py) would otherwise be spent by
        # the 50-odd faulty cases before it, made within seconds, and a late case would get no retry
        retry._budgets.clear()  # pyright: ignore[reportPrivateUsage]
        llm = get_chat_model(
            {"model": "m", "model_server": url, "api_key": KEY,
             "generate_cfg": {"retry_delay": 0.01, "max_retries": 2, "request_timeout": 0.6}}
        )  # fmt: skip
        bot = FnCallAgent(llm=llm, function_list=[weather])
        start = time.monotonic()
        seen: list = []
        try:
            if stream:
                for rsp in bot.run(USER):
                    seen.append(rsp)
                final = seen[-1]
            else:
                final = bot.run_nonstream(USER)
            ok = expect == "recover" and final[-1]["content"] == answer
        except ChatAgentError as e:
            text = str(e)
            ok = expect in ("error", "partial") and KEY not in text and bool(getattr(e, "message", text))
            if expect == "partial":
                ok = ok and isinstance(e, ModelServiceError) and e.partial
                if stream:
                    ok = ok and ANSWER.startswith(seen[-1][-1]["content"]) and seen[-1][-1]["content"] != ANSWER
        except Exception as e:  # anything else is a failure to survive
            ok = False
            failures.append(f"{name} ({'stream' if stream else 'once'}): {type(e).__name__}: {e}")
        ok = ok and time.monotonic() - start < bound and KEY not in log.text.getvalue()
        if ok:
            survived += 1
        elif not failures or not failures[-1].startswith(name):
            failures.append(f"{name} ({'stream' if stream else 'once'})")

    with OpenAIServer() as server:
        for name, replies, expect, bound in fault_cases():
            for stream in (True, False):
                server.reset()
                server.add(*replies)
                check(name, stream, server.base_url, expect, bound)
    sock, url = _raw_server(_lone_surrogate_answer)
    for stream in (True, False):
        check("lone surrogate escape in the stream", stream, url, "recover", 5.0, answer="ab\ufffdcd")
    sock.close()
    for name, text in (("TCP reset after headers", b""), ("TCP reset after text", b"It is")):
        sock, url = _raw_server(_reset_after(text))
        for stream in (True, False):
            check(name, stream, url, "partial" if text else "error", 5.0)
        sock.close()
    with contextlib.ExitStack() as stack:  # a full listen queue: the connection is never answered
        listener = stack.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):
            s = stack.enter_context(socket.socket())
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
        for stream in (True, False):
            check("connect timeout", stream, f"http://127.0.0.1:{port}/v1", "error", 5.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]
    for stream in (True, False):
        check("connection refused", stream, f"http://127.0.0.1:{refused}/v1", "error", 5.0)
    return injected, survived, failures


# ---- (b) hostile input ---------------------------------------------------------------------------------------------


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kinds = ["none", "bool", "int", "str", "bytes", "list", "dict"] if depth < 3 else ["none", "int", "str"]
    kind = rng.choice(kinds)
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if kind == "dict":
        keys = ["role", "content", "name", "function_call", "tool_calls", "text", "image", "file", "type", "x"]
        return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return {"none": None, "bool": True, "int": rng.randrange(-5, 5), "str": rng.choice(["", "hi", "\x00", "\ud800"]),
            "bytes": b"\xff"}[kind]  # fmt: skip


def _random_text(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(n)))


def run_hostile(n: int) -> tuple[int, int, list[str]]:
    rng = random.Random(7)
    tried = handled = 0
    failures: list[str] = []

    def attempt(what: str, fn: Callable[[], bool], allowed: tuple[type[BaseException], ...]) -> None:
        nonlocal tried, handled
        tried += 1
        try:
            ok = fn()
        except allowed as e:
            ok = bool(str(e).strip())
        except Exception as e:
            ok = False
            failures.append(f"{what}: {type(e).__name__}: {str(e)[:80]}")
        handled += bool(ok)

    shapes = FnCallAgent(llm=ScriptedLLM(default="ok"))
    roles = ["user", "assistant", "system", "function", "tool", "bogus", None]
    for _ in range(n):
        fields = ["content", "name", "function_call", "tool_calls", "extra", "reasoning_content"]
        data = [
            {"role": rng.choice(roles), **{k: _random_value(rng, 1) for k in rng.sample(fields, rng.randrange(3))}}
            for _ in range(rng.randrange(4))
        ]
        data = data if rng.random() < 0.8 else _random_value(rng)
        attempt(
            "messages",
            lambda d=data: shapes.run_nonstream(d)[-1]["content"] == "ok",
            (MessageError, TypeError, ValueError),
        )
    alphabet = "{}[]\",:'\\ acity0123456789.-\n`#truenullNone\x00"
    for _ in range(n):
        name = rng.choice(
            ["weather", "rm -rf /", "", "a" * 300, "weather\x00", "../weather", _random_text(rng, "abc_- ", 10)]
        )
        args = _random_text(rng, alphabet, 50) if rng.random() < 0.8 else "[" * 5000
        llm = ScriptedLLM([ScriptReply(function_calls=[FunctionCall(name, args)]), "done"])

        def tool_run(llm: ScriptedLLM = llm) -> bool:
            out = FnCallAgent(llm=llm, function_list=[weather]).run_nonstream(USER)
            return out[1]["role"] == "function" and out[-1]["content"] == "done"

        attempt("tool call", tool_run, ())
    with OpenAIServer() as server:
        llm = get_chat_model({"model": "m", "model_server": server.base_url, "api_key": KEY})
        for _ in range(max(n // 10, 5)):
            text = _random_text(rng, "ab \x00\ud800\udfff\U0001f600\ufeff", 20)
            server.add("ok")

            def send(text: str = text) -> bool:
                out = FnCallAgent(llm=llm).run_nonstream([{"role": "user", "content": text}])
                return out[-1]["content"] == "ok"

            attempt("odd text to the server", send, ())
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        from chatagent.rag import DocStore, DocumentError, parse_bytes

        store = DocStore(Path(tmp) / "ws")
        paths = ["../../etc/hostname.txt", "/etc/passwd.txt", "a\x00b.txt", "x" * 300 + ".txt", "CON", "NUL.txt",
                 "aux.md", "COM1.csv", "", "/", "\udcff.txt", "C:\\Windows\\win.ini"]  # fmt: skip
        for p in paths:
            attempt("file path", lambda p=p: bool(store.load([p])[1]), ())
        bases = {
            "pdf": _pdf(),
            "docx": _docx(),
            "xlsx": _docx(),
            "html": b"<html><p>hi</p></html>",
            "csv": b"a,b\n1,2\n",
        }
        logging.disable(logging.WARNING)
        for _ in range(n):
            ext = rng.choice(sorted(bases))
            data = bytearray(bases[ext])
            for _ in range(rng.randrange(1, 30)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.3:
                data = data[: rng.randrange(1, len(data))]
            attempt("damaged file", lambda d=bytes(data), e=ext: bool(parse_bytes(d, f"f.{e}").pages), (DocumentError,))
        attempt("zip bomb docx", lambda: bool(parse_bytes(_zip_bomb(), "bomb.docx")), (DocumentError,))
        logging.disable(logging.NOTSET)
    return tried, handled, failures


def _pdf() -> bytes:
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "A page of text for the damage test.")
    return bytes(pdf.output())


def _docx() -> bytes:
    import docx

    out = io.BytesIO()
    d = docx.Document()
    d.add_paragraph("A paragraph for the damage test.")
    d.save(out)
    return out.getvalue()


def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"\0" * (64 * 1024 * 1024))
    return out.getvalue()


# ---- (c) concurrency -----------------------------------------------------------------------------------------------


def run_concurrency(threads: int) -> tuple[int, int, list[str]]:
    failures: list[str] = []

    def scripted(messages: list, functions: object) -> object:
        last = messages[-1]
        if last.role == "user":
            return tool_call("weather", {"city": last.text})
        return f"answer: {last.text}"

    def many(bot: FnCallAgent, label: str) -> int:
        barrier = threading.Barrier(threads)

        def one(i: int) -> bool:
            barrier.wait()
            try:
                out = bot.run_nonstream([{"role": "user", "content": f"city{i}"}])
            except Exception as e:
                failures.append(f"{label}: {type(e).__name__}: {e}")
                return False
            # the model saw the tool's result marked as untrusted data: its echo holds this thread's result only
            answer = out[-1]["content"]
            return answer.startswith("answer: ") and f"\nsunny in city{i}\n" in answer and answer.count("sunny") == 1

        with ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(one, range(threads)))

    clean = many(FnCallAgent(llm=ScriptedLLM(default=scripted), function_list=[weather]), "scripted")

    def served(request: object) -> Reply:
        last = request.json["messages"][-1]  # type: ignore[attr-defined]
        if last["role"] == "user":
            return Reply(tool_calls=[("weather", {"city": last["content"]})])
        return Reply(text=f"answer: {last['content']}")

    with OpenAIServer() as server:
        server.add(*[served] * (2 * threads))
        llm = get_chat_model({"model": "m", "model_server": server.base_url, "api_key": KEY})
        clean += many(FnCallAgent(llm=llm, function_list=[weather]), "http")
    import tempfile

    from chatagent.rag import DocStore

    with tempfile.TemporaryDirectory() as tmp:
        manual = Path(tmp) / "manual.md"
        manual.write_text("\n\n".join(f"Fact {i}: code {i * 7}." for i in range(300)))
        store = DocStore(Path(tmp) / "ws")
        # the model echoes its whole prompt: the excerpts go with the question, not in the system message
        echo = ScriptedLLM(default=lambda m, f: "\n".join(x.text for x in m))
        bot = Assistant(llm=echo, files=[str(manual)], rag_cfg={"store": store})
        barrier = threading.Barrier(threads)

        def ask(i: int) -> bool:
            barrier.wait()
            try:
                return (
                    f"Fact {i}: code {i * 7}."
                    in bot.run_nonstream([{"role": "user", "content": f"Fact {i}"}])[-1]["content"]
                )
            except Exception as e:
                failures.append(f"rag: {type(e).__name__}: {e}")
                return False

        with ThreadPoolExecutor(threads) as pool:
            rag_ok = sum(pool.map(ask, range(threads)))
        if store.parses != 1:
            failures.append(f"rag: {store.parses} parses of one file")
            rag_ok = 0
        clean += rag_ok
    return 3 * threads, clean, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer hostile inputs")
    args = parser.parse_args()
    log = LogTrap()
    root = logging.getLogger()
    root.addHandler(log)
    root.setLevel(logging.DEBUG)
    for handler in root.handlers:
        if handler is not log:
            handler.setLevel(logging.CRITICAL)
    logging.lastResort = None

    t0 = time.perf_counter()
    injected, survived, fault_failures = run_faults(log)
    t1 = time.perf_counter()
    root.setLevel(logging.WARNING)  # DEBUG for the fault runs only: the rest is about inputs, not logs
    tried, handled, hostile_failures = run_hostile(60 if args.quick else 300)
    t2 = time.perf_counter()
    runs, clean, concurrency_failures = run_concurrency(50)
    t3 = time.perf_counter()
    key_logged = KEY in log.text.getvalue()

    print(f"{'reliability':<34}{'tried':>8}{'ok':>8}{'seconds':>10}")
    print(f"{'model-server faults / survived':<34}{injected:>8}{survived:>8}{t1 - t0:>10.1f}")
    print(f"{'hostile inputs / handled':<34}{tried:>8}{handled:>8}{t2 - t1:>10.1f}")
    print(f"{'concurrent runs / clean':<34}{runs:>8}{clean:>8}{t3 - t2:>10.1f}")
    print()
    print(f"faults_survived: {survived}/{injected}")
    print(f"hostile_inputs_handled: {handled}/{tried}")
    print(f"concurrent_runs_clean: {clean}/{runs}")
    print(f"api_key_in_logs: {'yes' if key_logged else 'no'}")
    for line in (fault_failures + hostile_failures + concurrency_failures)[:20]:
        print(f"  failed: {line}")
    if survived < injected or handled < tried or clean < runs or key_logged:
        sys.exit("reliability: not every case came through (see above)")  # make bench stops here


if __name__ == "__main__":
    main()
