"""Assistant and the retrieval / doc_parser tools, with ScriptedLLM and real files."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from chatagent import Assistant, FnCallAgent, ScriptedLLM, tool_call
from chatagent.rag import DocStore, Progress
from chatagent.schema import content_text

pytestmark = pytest.mark.timeout(60)

FILLER = "\n\n".join(f"Filler paragraph {i} says nothing of note about any subject." for i in range(60))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "ws", chunk_tokens=80, overlap_tokens=10)


def system_text(llm: ScriptedLLM, call: int = 0) -> str:
    first = llm.calls[call].messages[0]
    assert first.role == "system"
    return content_text(first.content)


def question_text(llm: ScriptedLLM, call: int = 0) -> str:
    """The text of the last user message the model got (its excerpts, then the question)."""
    return next(m.text for m in reversed(llm.calls[call].messages) if m.role == "user")


def test_assistant_puts_cited_excerpts_before_the_question(tmp_path: Path, store: DocStore) -> None:
    manual = write(tmp_path / "manual.txt", FILLER + "\n\nInstall packages with install.packages('name').\n\n" + FILLER)
    extra = write(tmp_path / "extra.md", "# Extra\n\nThe office opens at nine.")
    llm = ScriptedLLM(["Use install.packages [manual.txt, p. 1]."])
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store, "max_ref_token": 300})
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"text": "How do I install packages?"}, {"file": str(extra)}]},
    ]
    before = copy.deepcopy(messages)
    out = bot.run_nonstream(messages)
    assert out[-1]["content"] == "Use install.packages [manual.txt, p. 1]."
    assert messages == before  # the caller's list is untouched
    system = system_text(llm)
    assert system.startswith("You are helpful.") and "cite" in system
    sent = question_text(llm)
    assert sent.startswith("Excerpts from my files:")
    assert "[manual.txt, p. 1]\nInstall packages with install.packages('name')." in sent
    assert sent.index("install.packages('name')") < sent.index("My question:") < sent.index("How do I install")
    assert sent.endswith("My question:\nHow do I install packages?\n[file: extra.md]")


def test_the_answer_carries_its_sources_best_first(tmp_path: Path, store: DocStore) -> None:
    manual = write(tmp_path / "manual.txt", FILLER + "\n\nThe vault code is 7781.\n\n" + FILLER)
    llm = ScriptedLLM(["It is 7781."])
    bot = Assistant(llm=llm, files=[str(manual)], rag_cfg={"store": store, "max_ref_token": 300})
    out = bot.run_nonstream([{"role": "user", "content": "What is the vault code?"}])
    sources = out[-1]["extra"]["sources"]
    assert sources and all(set(s) >= {"file", "pages", "text"} for s in sources)
    assert (
        sources[0]["file"] == "manual.txt" and sources[0]["pages"] == [1] and "vault code is 7781" in sources[0]["text"]
    )
    assert all(len(s["text"]) <= 302 for s in sources)  # a snippet, not the excerpt


def test_sources_go_on_the_final_answer_after_tool_calls(tmp_path: Path, store: DocStore) -> None:
    from chatagent import tool as make_tool

    @make_tool
    def today() -> str:
        """Today's date."""
        return "2024-05-01"

    doc = write(tmp_path / "a.txt", "Alpha facts.")
    llm = ScriptedLLM([tool_call("today", {}), "Alpha, on 2024-05-01."])
    bot = Assistant(llm=llm, function_list=[today], files=[str(doc)], rag_cfg={"store": store})
    streamed = list(bot.run([{"role": "user", "content": "alpha today?"}]))
    out = streamed[-1]
    assert [m["role"] for m in out] == ["assistant", "function", "assistant"]
    assert "sources" not in (out[0].get("extra") or {})
    assert out[-1]["extra"]["sources"][0]["file"] == "a.txt"
    assert out[-1]["content"] == "Alpha, on 2024-05-01."


def test_everything_goes_in_when_it_fits(tmp_path: Path, store: DocStore) -> None:
    a = write(tmp_path / "a.txt", "Alpha: the code is 11.")
    b = write(tmp_path / "b.txt", "Beta: the code is 22.")
    llm = ScriptedLLM(["ok"])
    out = Assistant(llm=llm, files=[str(a), str(b)], rag_cfg={"store": store}).run_nonstream(
        [{"role": "user", "content": "codes?"}]
    )
    sent = question_text(llm)
    assert sent.index("[a.txt, p. 1]\nAlpha") < sent.index("[b.txt, p. 1]\nBeta")
    assert [s["file"] for s in out[-1]["extra"]["sources"]] == ["a.txt", "b.txt"]


def test_unreadable_files_are_named_and_the_rest_answers(tmp_path: Path, store: DocStore) -> None:
    good = write(tmp_path / "good.txt", "The answer is 42.")
    empty = write(tmp_path / "empty.txt", "")
    llm = ScriptedLLM(["42, but empty.txt could not be read."])
    bot = Assistant(llm=llm, rag_cfg={"store": store})
    content = [{"text": "What is the answer?"}, {"file": str(good)}, {"file": str(empty)}]
    bot.run_nonstream([{"role": "user", "content": content}])
    sent = question_text(llm)
    assert "The answer is 42." in sent
    assert "could not be read" in sent and "'empty.txt' is empty" in sent


def test_chinese_prompt_and_progress(tmp_path: Path, store: DocStore) -> None:
    doc = write(tmp_path / "说明.txt", "大熊猫主要以竹子为食。")
    events: list[Progress] = []
    llm = ScriptedLLM(["竹子 [说明.txt, p. 1]"])
    bot = Assistant(llm=llm, files=[str(doc)], rag_cfg={"store": store, "on_progress": events.append})
    bot.run_nonstream([{"role": "user", "content": "大熊猫吃什么？"}])
    assert "注明出处" in system_text(llm)
    sent = question_text(llm)
    assert sent.startswith("我的文件中的摘录：") and "[说明.txt, p. 1]\n大熊猫主要以竹子为食。" in sent
    assert sent.endswith("我的问题： 大熊猫吃什么？")
    assert [e.stage for e in events] == ["parse", "index", "search"]


def test_no_files_means_no_knowledge(store: DocStore) -> None:
    llm = ScriptedLLM(["hi"])
    Assistant(llm=llm, rag_cfg={"store": store}).run_nonstream([{"role": "user", "content": "hello"}])
    assert llm.calls[0].messages[0].role == "user"


def test_streaming_yields_the_answer(tmp_path: Path, store: DocStore) -> None:
    doc = write(tmp_path / "a.txt", "Alpha facts.")
    llm = ScriptedLLM(["Alpha is a fact of the file."], chunk_size=3)
    bot = Assistant(llm=llm, files=[str(doc)], rag_cfg={"store": store})
    outs = list(bot.run([{"role": "user", "content": "alpha?"}]))
    assert len(outs) > 1 and outs[-1][-1]["content"] == "Alpha is a fact of the file."


# ------------------------------------------------------------------------------------------- tools


def test_retrieval_tool_reads_only_the_users_files(tmp_path: Path, store: DocStore) -> None:
    manual = write(tmp_path / "manual.txt", FILLER + "\n\nThe vault code is 7781.\n\n" + FILLER)
    secret = write(tmp_path / "secret.txt", "Not for the model.")
    llm = ScriptedLLM(
        [
            tool_call("retrieval", {"query": "vault code"}),
            tool_call("retrieval", {"query": "anything", "files": [str(secret)]}),
            tool_call("retrieval", {"query": "anything", "files": ["../../etc/passwd"]}),
            tool_call("retrieval", {"query": "vault", "files": ["manual.txt"]}),
            "The code is 7781 [manual.txt, p. 1].",
        ]
    )
    bot = FnCallAgent(llm=llm, function_list=[{"name": "retrieval", "store": store, "max_ref_token": 200}])
    out = bot.run_nonstream([{"role": "user", "content": [{"text": "vault code?"}, {"file": str(manual)}]}])
    results = [m["content"] for m in out if m["role"] == "function"]
    assert "The vault code is 7781." in results[0] and "[manual.txt, p. 1]" in results[0]
    assert results[1].startswith("Refused") and "manual.txt" in results[1] and "Not for the model" not in results[1]
    assert results[2].startswith("Refused")
    assert "7781" in results[3]
    assert out[-1]["content"] == "The code is 7781 [manual.txt, p. 1]."


def test_doc_parser_tool(tmp_path: Path, store: DocStore) -> None:
    notes = write(tmp_path / "notes.md", "# Notes\n\nBuy milk.")
    llm = ScriptedLLM(
        [
            tool_call("doc_parser", {"url": "notes.md"}),
            tool_call("doc_parser", {"url": "/etc/hostname"}),
            "done",
        ]
    )
    bot = FnCallAgent(llm=llm, function_list=[{"name": "doc_parser", "store": store, "files": [str(notes)]}])
    out = bot.run_nonstream([{"role": "user", "content": "read my notes"}])
    results = [m["content"] for m in out if m["role"] == "function"]
    assert results[0] == "[notes.md, p. 1]\n# Notes\n\nBuy milk."
    assert results[1].startswith("Refused")


def test_the_run_deadline_covers_reading_the_files(tmp_path: Path, store: DocStore) -> None:
    from chatagent import RunDeadlineExceeded

    doc = write(tmp_path / "big.txt", FILLER * 20)
    llm = ScriptedLLM(["never asked"])
    bot = Assistant(llm=llm, files=[str(doc)], rag_cfg={"store": store})
    with pytest.raises(RunDeadlineExceeded):
        list(bot.run([{"role": "user", "content": "filler?"}], deadline=1e-6))
    assert llm.calls == []


def test_tools_called_directly_with_dict_messages_read_the_users_files(tmp_path: Path, store: DocStore) -> None:
    from chatagent.tools.retrieval import Retrieval

    manual = write(tmp_path / "manual.txt", "The vault code is 7781.")
    tool = Retrieval({"store": store})
    messages = [
        {"role": "user", "content": [{"text": "vault code?"}, {"file": str(manual)}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function", "function": {
            "name": "retrieval", "arguments": "{}"}}]},  # OpenAI-format history is understood too
        {"role": "tool", "tool_call_id": "1", "content": "..."},
    ]  # fmt: skip
    assert "7781" in tool.call({"query": "vault code"}, messages=messages)
    assert tool.call({"query": "vault code"}, messages=[]).startswith("The user has not given any files")


def test_doc_parser_finds_a_password_by_file_name(tmp_path: Path, store: DocStore) -> None:
    from chatagent.tools.doc_parser import DocParser
    from tests.rag.test_rag_parsers import encrypt_pdf, make_pdf

    path = tmp_path / "locked.pdf"
    path.write_bytes(encrypt_pdf(make_pdf(["The vault code is 1234."]), "pw"))
    from chatagent.tools.simple_doc_parser import DocParserError

    locked = DocParser({"store": store, "files": [str(path)]})
    assert "password" in locked.call({"url": "locked.pdf"}, messages=[])  # in a run: a text for the model
    with pytest.raises(DocParserError) as caught:  # called by code: Qwen-Agent's error
        locked.call({"url": "locked.pdf"})
    assert caught.value.code == "needs_password"
    tool = DocParser({"store": store, "files": [str(path)], "passwords": {"locked.pdf": "pw"}})
    assert "The vault code is 1234." in tool.call({"url": "locked.pdf"}, messages=[])
    assert "The vault code is 1234." in tool.call({"url": "locked.pdf"})["raw"][0]["content"]
