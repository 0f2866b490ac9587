"""Hostile input: wrong shapes, odd text, huge and deeply nested values, odd names, odd paths, bad files.

Expected everywhere: a clear typed error naming the problem (or, for the model's mistakes, a function
message it can read), the process and the agent instance survive, and nothing is written outside the
workspace. Hypothesis tests are bounded (max_examples) to keep the suite fast.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from chatagent import Assistant, BasicAgent, FnCallAgent, ScriptedLLM, get_chat_model, tool_call
from chatagent.errors import ModelServiceError
from chatagent.llm.prepare import untrusted
from chatagent.llm.scripted import Reply
from chatagent.rag import DocStore, DocumentError, parse_file
from chatagent.schema import FunctionCall, MessageError, to_openai
from chatagent.tools.base import BaseTool
from tests.support.openai_server import OpenAIServer
from tests.support.openai_server import Reply as ServerReply

pytestmark = pytest.mark.timeout(60)

HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def lookup(query: str, limit: int = 3) -> str:
    """Look something up.

    Args:
        query: what to look up
        limit: how many results
    """
    return f"found {query!r} x{limit}"


# ---- messages of the wrong shape ------------------------------------------------------------------------------

_KEYS = ["role", "content", "name", "function_call", "tool_calls", "extra", "text", "image", "file", "type"]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.binary(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(_KEYS + ["arguments", "id", "x"]), inner, max_size=4)
    ),
    max_leaves=10,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "function", "tool", "bogus", "", None, 3])},
    optional={k: _json for k in ("content", "name", "function_call", "tool_calls", "extra", "reasoning_content")},
)

_shape_bot = BasicAgent(llm=ScriptedLLM(default="fine"))


@HYPOTHESIS
@given(st.one_of(_json, st.lists(st.one_of(_message, _json), max_size=4)))
def test_any_shape_of_messages_gives_a_typed_error_or_an_answer(data: object) -> None:
    try:
        out = _shape_bot.run_nonstream(data)  # type: ignore[arg-type]
    except MessageError as e:
        assert "messages" in str(e) or "content" in str(e) or "role" in str(e)
    except (TypeError, ValueError) as e:
        assert str(e).startswith("messages"), e  # names the problem, e.g. "messages must be a list ..."
    else:
        assert out[-1]["content"] == "fine"
    assert _shape_bot.run_nonstream([{"role": "user", "content": "still there?"}])[-1]["content"] == "fine"


def test_none_as_messages_is_named_clearly() -> None:
    """Regression: None gave "'NoneType' object is not iterable"."""
    for bad in (None, 3, 2.5, True):
        with pytest.raises(TypeError, match="messages must be a list of messages, got"):
            _shape_bot.run_nonstream(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["bogus", "User", "", "ASSISTANT", "tool_result", "\x00"])
def test_unknown_roles_name_the_message_and_the_role(role: str) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": role, "content": "x"}]
    with pytest.raises(MessageError) as info:
        _shape_bot.run_nonstream(msgs)
    assert "messages[1]" in str(info.value) and repr(role) in str(info.value)


# ---- odd text reaches the server as valid JSON ------------------------------------------------------------------


def oai(server: OpenAIServer, **generate_cfg: object) -> object:
    cfg = {"max_retries": 0, **generate_cfg}
    return get_chat_model({"model": "m", "model_server": server.base_url, "api_key": "k-test", "generate_cfg": cfg})


@pytest.mark.timeout(30)
def test_nul_bytes_and_lone_surrogates_reach_the_server_as_valid_json(openai_server: OpenAIServer) -> None:
    """Regression: one lone surrogate made the request's encoding fail with a bare UnicodeEncodeError."""
    openai_server.add("ok", "done")
    history = [
        {"role": "system", "content": "sys \x00 \udc80"},
        {"role": "user", "content": [{"text": "a\x00b \ud800 c"}, {"text": "pair \ud83d\ude00"}]},
        {"role": "assistant", "content": "", "function_call": {"name": "lookup", "arguments": '{"query": "\udfff"}'}},
        {"role": "function", "name": "lookup", "content": "res \x00 \ud801"},
        {"role": "user", "content": "again \udcff"},
    ]
    bot = FnCallAgent(llm=oai(openai_server), function_list=[lookup])
    assert bot.run_nonstream(history)[-1]["content"] == "ok"
    sent = openai_server.chat_requests[0].json["messages"]
    assert sent[0]["content"] == "sys \x00 \ufffd"
    assert sent[1]["content"] == "a\x00b \ufffd c\npair \U0001f600"  # a pair is joined, a lone one replaced
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"query": "\ufffd"}'
    assert sent[3]["content"] == untrusted("res \x00 \ufffd", "tool lookup") and sent[4]["content"] == "again \ufffd"
    assert history[4]["content"] == "again \udcff"  # the caller's messages are untouched


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())


@HYPOTHESIS
@given(st.lists(st.one_of(_SURROGATES, st.characters(codec=None, exclude_categories=())), max_size=30).map("".join))
def test_any_text_prepared_for_a_model_encodes_as_utf8(text: str) -> None:
    llm = ScriptedLLM(default="ok")
    llm.chat([{"role": "user", "content": text}, {"role": "assistant", "content": text, "name": text}], stream=False)
    body = json.dumps(to_openai(llm.calls[0].messages), ensure_ascii=False).encode("utf-8")
    assert json.loads(body)


# ---- huge content ------------------------------------------------------------------------------------------------

TEN_MB = ("lorem ipsum dolor " * 600_000)[:10_000_000]


@pytest.mark.timeout(120)
def test_a_10mb_message_is_refused_before_anything_is_sent(openai_server: OpenAIServer) -> None:
    with pytest.raises(ModelServiceError) as info:
        BasicAgent(llm=oai(openai_server, long_input="raise")).run_nonstream([{"role": "user", "content": TEN_MB}])
    assert info.value.code == "context_too_long" and "max_input_tokens" in info.value.message
    assert openai_server.chat_requests == []


@pytest.mark.timeout(120)
def test_a_10mb_message_is_shortened_to_fit_and_answered(openai_server: OpenAIServer) -> None:
    """The default, as Qwen-Agent's: the message's beginning and end reach the model, the middle is cut."""
    openai_server.add("ok")
    text = "BEGIN " + TEN_MB + " END?"
    out = BasicAgent(llm=oai(openai_server, max_input_tokens=2000)).run_nonstream([{"role": "user", "content": text}])
    assert out[-1]["content"] == "ok"
    sent = openai_server.chat_requests[0].json["messages"][-1]["content"]
    assert sent.startswith("BEGIN lorem") and sent.endswith("END?") and "[middle cut]" in sent
    assert len(sent) < 20_000


@pytest.mark.timeout(300)  # 10 MB cut to fit: 30 s, then 120 s, passed at a load of 20 on 2 cores
def test_a_tool_returning_10mb_does_not_end_the_run(openai_server: OpenAIServer) -> None:
    """Regression: a huge tool result in the current turn made every later model call fail (context_too_long)."""

    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: the address
        """
        return TEN_MB

    openai_server.add(
        ServerReply(tool_calls=[("fetch", {"url": "http://x"})]), "The page is long; it says lorem ipsum."
    )
    bot = FnCallAgent(llm=oai(openai_server, max_input_tokens=20_000), function_list=[fetch])
    out = bot.run_nonstream([{"role": "user", "content": "summarise http://x"}])
    assert out[-1]["content"] == "The page is long; it says lorem ipsum."
    assert len(out[1]["content"]) == len(TEN_MB)  # the caller gets the whole result
    sent = openai_server.chat_requests[1].json["messages"][-1]["content"]
    assert sent.endswith("[truncated]") and len(sent) < 200_000  # the model gets what fits


# ---- deeply nested and malformed tool arguments; tool names that are not identifiers -------------------------------


class Tree(BaseTool):
    name = "tree"
    description = "Walks a tree."
    parameters = {
        "$defs": {
            "node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def call(self, params: str | dict, **kwargs: object) -> str:
        self.calls += 1
        return "walked"


def _nested(depth: int) -> str:
    return '{"root": ' + '{"kids": [' * depth + "{}" + "]}" * depth + "}"


@pytest.mark.parametrize(
    "arguments",
    [
        "[" * 100_000 + "]" * 100_000,  # past any parser's depth
        '{"root": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}",
        _nested(450),  # parses, but too deep to validate against the recursive schema
        '{"root": {"kids": [' + "1" * 30 + ", " + "[" * 2000 + "]" * 2000 + "]}}",  # the exact-integer parser path
        "{" * 50_000,  # unclosed: the repair path
    ],
    ids=["brackets-100k", "objects-5000", "schema-450", "long-int-2000", "unclosed-50k"],
)
def test_deeply_nested_arguments_are_fed_back_not_crashed_on(arguments: str) -> None:
    tree = Tree()
    llm = ScriptedLLM([Reply(function_calls=[FunctionCall("tree", arguments)]), "ok"])
    bot = FnCallAgent(llm=llm, function_list=[tree], generate_cfg={"max_input_tokens": 10**7})
    out = bot.run_nonstream([{"role": "user", "content": "walk it"}])  # (a hang: the module's 60 s deadline)
    assert out[-1]["content"] == "ok" and tree.calls == 0
    assert out[1]["role"] == "function" and "invalid arguments for tree" in out[1]["content"]
    assert sys.getrecursionlimit() >= 1000  # nobody raised it to get through


def test_a_tree_of_reasonable_depth_is_accepted() -> None:
    tree = Tree()
    llm = ScriptedLLM([Reply(function_calls=[FunctionCall("tree", _nested(40))]), "ok"])
    assert FnCallAgent(llm=llm, function_list=[tree]).run_nonstream([{"role": "user", "content": "x"}])[1][
        "content"
    ] == ("walked")


@HYPOTHESIS
@given(
    name=st.one_of(
        st.sampled_from(["lookup", "rm -rf /", "../lookup", "", "a" * 300, "lookup\x00", "LOOKUP", "look up", "🔎"]),
        st.text(max_size=20),
    ),
    arguments=st.one_of(
        st.text(
            alphabet=st.sampled_from(list("{}[]\",:'\\ aquerylimt0123456789.-eE\n`#/*truenullNone\x00")), max_size=60
        ),
        st.text(max_size=40),
    ),
)
def test_any_tool_name_and_arguments_become_a_readable_function_message(name: str, arguments: str) -> None:
    llm = ScriptedLLM([Reply(function_calls=[FunctionCall(name, arguments)]), "done"])
    out = FnCallAgent(llm=llm, function_list=[lookup]).run_nonstream([{"role": "user", "content": "go"}])
    assert [m["role"] for m in out] == ["assistant", "function", "assistant"] and out[-1]["content"] == "done"
    result = out[1]["content"]
    assert result.startswith("found ") or result.startswith("Error: ")
    if name != "lookup":
        assert "no tool named" in result and "lookup" in result  # the model is told what exists


def test_a_tool_calling_sys_exit_does_not_end_the_run() -> None:
    """Regression: a tool's sys.exit() (argparse on bad arguments does it) ended the whole run, or with a
    timeout killed the worker silently and was reported as a timeout after the full wait (here 120 s: the module's
    60 s deadline would end the test first)."""

    def cli(args: str) -> str:
        """Run a command line.

        Args:
            args: the arguments
        """
        sys.exit(2)

    for cfg in ({}, {"timeout": 120}):
        from chatagent.tools import tool

        llm = ScriptedLLM([tool_call("cli", {"args": "--bad"}), "ok"])
        out = FnCallAgent(llm=llm, function_list=[tool(cli, **cfg)]).run_nonstream([{"role": "user", "content": "x"}])
        assert out[1]["content"] == "Error: cli failed: SystemExit: 2" and out[-1]["content"] == "ok"


def test_a_callable_object_without_a_name_is_refused_clearly() -> None:
    """Regression: a callable instance in function_list raised AttributeError: no attribute '__name__'."""

    class Weather:
        def __call__(self, city: str) -> str:
            return city

    with pytest.raises(TypeError, match="has no __name__: name the tool"):
        FnCallAgent(llm=ScriptedLLM(default="x"), function_list=[Weather()])


# ---- file names and paths -------------------------------------------------------------------------------------------

HOSTILE_NAMES = [
    "../../../../etc/hostname.txt",
    "/etc/passwd.txt",
    "a\x00b.txt",
    "x" * 300 + ".txt",
    "CON",
    "NUL.txt",
    "aux.md",
    "COM1.csv",
    "LPT9.html",
    "",
    ".",
    "/",
    "file:///etc/passwd",
    "\udcff.txt",
    "line\nbreak.txt",
    "C:\\Windows\\win.ini",
    "\\\\server\\share\\x.txt",
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.timeout(30)
def test_hostile_file_names_are_named_to_the_model_and_nothing_is_written_outside_the_workspace(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    (work / "real.txt").write_text("The real file says: tea at five.", encoding="utf-8")
    monkeypatch.chdir(work)
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "ws"))
    before = _tree(tmp_path)
    store = DocStore(tmp_path / "ws")
    items = [{"text": "What do my files say?"}] + [{"file": n} for n in HOSTILE_NAMES + ["real.txt"]]
    openai_server.add("They say tea at five.")
    bot = Assistant(llm=oai(openai_server), rag_cfg={"store": store})
    out = bot.run_nonstream([{"role": "user", "content": items}])
    assert out[-1]["content"] == "They say tea at five."
    system = _question_sent(openai_server)  # the excerpts and the unreadable files come with the question
    assert "tea at five" in system and "could not be read" in system
    assert system.count("\n- ") >= len(HOSTILE_NAMES) - 3  # each unreadable file is listed ('', '.', '/' may merge)
    written = _tree(tmp_path) - before
    assert written and all(p.startswith("ws") for p in written), sorted(written)
    assert all(len(Path(p).name) <= 80 and "\x00" not in p for p in written)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_parse_file_names_the_problem_for_hostile_paths(name: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_file(name)
    assert info.value.reason in ("broken", "unsupported")
    assert str(info.value).strip()


# ---- corrupt, truncated and encrypted PDFs; a zip bomb posing as DOCX ----------------------------------------------


def _pdf(text: str) -> bytes:
    import fpdf

    pdf = fpdf.FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def _encrypted(data: bytes, password: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _zip_bomb(size: int = 64 * 1024 * 1024) -> bytes:
    """A DOCX-looking zip whose document inflates from about 64 KB to `size` bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w") as member:
            block = b"\0" * (4 * 1024 * 1024)
            for _ in range(size // len(block)):
                member.write(block)
    return out.getvalue()


@pytest.mark.timeout(60)
def test_bad_documents_are_reported_to_the_model_and_the_good_one_still_answers(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    good = _pdf("The warranty lasts three years.")
    files = {
        "good.pdf": good,
        "garbage.pdf": b"%PDF-1.7\n" + os.urandom(4000),
        "truncated.pdf": good[: len(good) // 2],
        "header-only.pdf": b"%PDF-1.4\n",
        "secret.pdf": _encrypted(_pdf("Hidden text."), "pw"),
        "bomb.docx": _zip_bomb(),
        "fake.docx": b"PK\x03\x04 this is not really a zip",
        "empty.pdf": b"",
    }
    paths = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    assert (tmp_path / "bomb.docx").stat().st_size < 2 * 1024 * 1024
    openai_server.add("Three years [good.pdf, p. 1].")
    bot = Assistant(llm=oai(openai_server), files=paths, rag_cfg={"store": DocStore(tmp_path / "ws")})
    out = bot.run_nonstream([{"role": "user", "content": "How long is the warranty?"}])  # (a hang: the 60 s deadline)
    assert out[-1]["content"] == "Three years [good.pdf, p. 1]."
    system = _question_sent(openai_server)
    assert "three years" in system
    for name in files:
        if name not in ("good.pdf", "truncated.pdf"):  # PDFium may repair a truncated file: then it is readable
            assert f"'{name}'" in system, name
    assert "password" in system and ("expand" in system or "zip bomb" in system)


def _question_sent(server) -> str:
    """The text of the last user message of the first request the model got."""
    last = [m for m in server.chat_requests[0].json["messages"] if m["role"] == "user"][-1]["content"]
    return last if isinstance(last, str) else "\n".join(part.get("text", "") for part in last)


def test_a_zip_bomb_docx_is_refused_by_the_parser_quickly(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    path.write_bytes(_zip_bomb())
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError) as info:
            parse_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.reason == "too_large" and "bomb.docx" in str(info.value)
    assert peak < 20 * 1024 * 1024  # refused before it was expanded (and a hang: the module's deadline)


@HYPOTHESIS
@given(data=st.binary(max_size=2000), ext=st.sampled_from(["pdf", "docx", "pptx", "xlsx", "html", "csv", "txt", "md"]))
def test_random_bytes_under_any_extension_give_a_document_or_a_document_error(data: bytes, ext: str) -> None:
    from chatagent.rag import parse_bytes

    logging.disable(logging.WARNING)
    try:
        doc = parse_bytes(data, f"random.{ext}")
    except DocumentError as e:
        assert "random." in str(e)
    else:
        assert doc.pages and all(p.text for p in doc.pages)
    finally:
        logging.disable(logging.NOTSET)


# ---- hostile model output: the answer does not depend on how the stream was cut ----------------------------------

_PIECES = [
    "Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "**Action:**", "**", " lookup", "\n",
    '{"query": "x"}', "{", "}", " ", "abc", "```json", "```", "<tool_call>", "</tool_call>", "<think>", "</think>",
    '{"name": "lookup", "arguments": {"query": "y"}}', "✿FUNCTION✿:", "✿ARGS✿:", "✿RESULT✿", "✿RETURN✿:", "：",
]  # fmt: skip
_model_text = st.lists(st.sampled_from(_PIECES), max_size=20).map("".join)


def _text_agent(kind: str, replies: list[str], chunk_size: int) -> FnCallAgent:
    from chatagent.agents.react_chat import ReActChat

    script = [Reply(text=t, chunk_size=chunk_size) for t in replies]
    cfg = {} if kind == "react" else {"fncall_prompt_type": kind}
    llm = ScriptedLLM(script, default="fin", generate_cfg=cfg)
    cls = ReActChat if kind == "react" else FnCallAgent
    return cls(llm=llm, function_list=[lookup], max_llm_calls=3)


def _without_ids(out: list[dict]) -> list[dict]:
    for m in out:
        (m.get("extra") or {}).pop("function_id", None)
    return out


@HYPOTHESIS
@given(
    first=_model_text,
    second=_model_text,
    chunk_size=st.integers(1, 7),
    kind=st.sampled_from(["react", "nous", "qwen"]),
)
@example(first="Final Answer:```", second="", chunk_size=1, kind="react")
@example(first="Thought:**Action:**✿FUNCTION✿:\n}", second="```json", chunk_size=1, kind="react")
@example(first="a\nThought: b", second="", chunk_size=1, kind="react")
@seed(20240611)  # the same examples in every run: a failure is this test's, not the luck of the draw
def test_text_protocol_answers_do_not_depend_on_stream_chunking(
    first: str, second: str, chunk_size: int, kind: str
) -> None:
    """Regression: ReAct read 'Thought:**x' and 'Final Answer:```' differently when the stream was cut right
    after the colon (the marker's decoration came in the next chunk); and wrote text before a Thought after the
    thought when the two came in one chunk (its transcript followed the chunking, not the reply)."""
    logging.disable(logging.WARNING)
    try:
        small = list(_text_agent(kind, [first, second], chunk_size).run([{"role": "user", "content": "go"}]))
        whole = list(_text_agent(kind, [first, second], 10_000).run([{"role": "user", "content": "go"}]))
        once = _text_agent(kind, [first, second], chunk_size).run_nonstream([{"role": "user", "content": "go"}])
    finally:
        logging.disable(logging.NOTSET)
    final_small = _without_ids(small[-1]) if small else []
    final_whole = _without_ids(whole[-1]) if whole else []
    assert final_small == final_whole == _without_ids(once)


# ---- remote clients must not reach the server's own files (regression: chatagent/server.py) -----------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("item", ["file", "image"])
def test_a_remote_client_cannot_make_the_served_agent_read_local_files(
    openai_server: OpenAIServer, tmp_path: Path, item: str
) -> None:
    import httpx

    from chatagent.server.runner import AgentServer

    secret = tmp_path / "secret.txt"
    secret.write_text("the root password is hunter2", encoding="utf-8")
    png = tmp_path / "private.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"hunter2" * 10)
    content = {
        "file": [{"type": "text", "text": "summarise"}, {"type": "file", "file": str(secret)}],
        "image": [{"type": "text", "text": "describe"}, {"type": "image_url", "image_url": {"url": str(png)}}],
    }[item]
    openai_server.add("a summary")
    llm = get_chat_model(
        {"model": "m", "model_server": openai_server.base_url, "api_key": "k", "multimodal": True}
    )  # fmt: skip
    agent = Assistant(llm=llm, rag_cfg={"store": DocStore(tmp_path / "ws")})
    server = AgentServer(agent, "127.0.0.1", 0).start()
    try:
        body = {"model": server.model_name, "messages": [{"role": "user", "content": content}]}
        reply = httpx.post(server.url + "/chat/completions", json=body, timeout=10)
    finally:
        server.close()
    sent = json.dumps([r.json for r in openai_server.chat_requests])
    assert "hunter2" not in sent and "aHVudGVyM" not in sent  # neither as text nor as base64
    assert reply.status_code == 400 and "must be an http(s) or data: URL" in reply.text


# ---- framework settings of the wrong type or range --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key,value",
    [
        ("retry_delay", -1),
        ("max_retry_wait", -0.5),
        ("max_retries", "3"),
        ("max_retries", -1),
        ("max_retries", True),
        ("max_input_tokens", "big"),
        ("max_input_tokens", 0),
        ("request_timeout", -5),
        ("request_timeout", "10"),
        ("fncall_prompt_type", "hermes"),
        ("temperature", "0.7"),
        ("temperature", -1),
        ("top_p", 1.5),
        ("max_tokens", 0),
        ("seed", 1.5),
        ("stop", 3),
        ("stop", ["###", 4]),
    ],
)
def test_bad_generate_cfg_values_fail_when_the_model_or_agent_is_built_naming_the_key(
    key: str, value: object, tmp_path
) -> None:
    """Regression: these failed deep inside at the first call (time.sleep: 'sleep length must be non-negative',
    "'>=' not supported between instances of 'int' and 'str'"), after the agent was built and its files read, or
    were sent to the server as they were. Now the model, or the agent given a config or generate_cfg, refuses them."""
    from chatagent import Assistant, get_chat_model
    from chatagent.rag.store import DocStore

    bad = rf"generate_cfg\['{key}'\] must be"
    with pytest.raises(ValueError, match=bad):
        ScriptedLLM(["ok"], generate_cfg={key: value})
    with pytest.raises(ValueError, match=bad):
        get_chat_model({"model": "m", "model_server": "http://127.0.0.1:9/v1", "generate_cfg": {key: value}})
    store = DocStore(tmp_path / "store")
    (tmp_path / "notes.md").write_text("Some notes.")
    for config in ({"llm": {"model": "m", "generate_cfg": {key: value}}}, {"generate_cfg": {key: value}}):
        with pytest.raises(ValueError, match=bad):
            Assistant(files=[str(tmp_path / "notes.md")], rag_cfg={"store": store}, **config)
    assert not list((tmp_path / "store").rglob("*.json"))  # no file was read


# ---- multi-agent orchestration under odd model output ------------------------------------------------------------


def test_a_group_chat_participant_saying_nothing_does_not_break_the_run() -> None:
    """Regression: an empty reply was dropped from the stream but kept in the response, so the next turn's
    fragments skipped an index: ValueError('fragment index 1 skips past the end of a response of 0 messages')."""
    from chatagent.agents.group_chat import GroupChat

    coder = BasicAgent(llm=ScriptedLLM(["", "second"]), name="coder")
    writer = BasicAgent(llm=ScriptedLLM(["Writer: "]), name="Writer")  # only its own name: empty once removed
    chat = GroupChat(agents=[coder, writer], selection="round_robin", max_rounds=3)
    streamed = list(chat.run([{"role": "user", "content": "hi"}]))[-1]
    assert streamed == [
        {"role": "assistant", "content": "", "name": "coder"},
        {"role": "assistant", "content": "", "name": "Writer"},
        {"role": "assistant", "content": "second", "name": "coder"},
    ]
    coder2 = BasicAgent(llm=ScriptedLLM(["", "second"]), name="coder")
    writer2 = BasicAgent(llm=ScriptedLLM(["Writer: "]), name="Writer")
    chat2 = GroupChat(agents=[coder2, writer2], selection="round_robin", max_rounds=3)
    assert chat2.run_nonstream([{"role": "user", "content": "hi"}]) == streamed


_ORCHESTRATION_PIECES = ["Call:", "**Call:**", " coder", " Coder", " nobody", "\n", " ", "abc", "@coder", "@Writer",
                         "[STOP]", "Writer", "coder:", "Coder: ", "\x00", "："]  # fmt: skip


@HYPOTHESIS
@given(
    replies=st.lists(
        st.lists(st.sampled_from(_ORCHESTRATION_PIECES), max_size=10).map("".join), min_size=3, max_size=3
    ),
    chunk_size=st.integers(1, 5),
    kind=st.sampled_from(["router", "group"]),
)
def test_router_and_group_chat_survive_any_model_output_and_any_chunking(
    replies: list[str], chunk_size: int, kind: str
) -> None:
    from chatagent.agents.group_chat import GroupChat
    from chatagent.agents.router import Router

    def build(size: int) -> object:
        def llm() -> ScriptedLLM:
            return ScriptedLLM([Reply(text=t, chunk_size=size) for t in replies], default="fin")

        agents = [BasicAgent(llm=llm(), name="coder", description="code"), BasicAgent(llm=llm(), name="Writer")]
        if kind == "router":
            return Router(llm=llm(), agents=agents)
        return GroupChat(agents=agents, selection="auto", llm=llm(), max_rounds=3)

    logging.disable(logging.WARNING)
    try:
        small = list(build(chunk_size).run([{"role": "user", "content": "hi"}]))
        whole = list(build(10_000).run([{"role": "user", "content": "hi"}]))
        once = build(chunk_size).run_nonstream([{"role": "user", "content": "hi"}])
    finally:
        logging.disable(logging.NOTSET)
    assert (small[-1] if small else []) == (whole[-1] if whole else []) == once


def test_react_marker_decoration_streamed_a_character_at_a_time_costs_linear_time() -> None:
    """The hold-back for a marker cut at a chunk boundary is bounded: 20,000 one-character chunks of
    decoration after 'Final Answer:' do not make the parser quadratic."""
    from chatagent.agents.react_parser import ReActParser

    parser = ReActParser()
    parser.feed("Final Answer:")
    held = 0  # what the parser holds back between chunks: each chunk costs its length plus this
    for _ in range(20_000):
        parser.feed("*")
        held = max(held, len(parser._pending))
    parser.feed(" done")
    step = parser.finish()[2]
    assert step.kind == "final" and step.answer.endswith("done")
    assert held <= 64  # bounded, whatever the number of chunks (a held line of 20,000 would be quadratic)
