"""The agent catalogue: each agent doing what it is for (Memory, the document QA agents, VirtualMemoryAgent,
TIRMathAgent, the simulators, DialogueRetrievalAgent, the writers, GroupChatCreator, GroupChatAutoRouter,
MultiAgentHub, ReActChat's transcript)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from chatagent import Agent, BasicAgent, Reply, ScriptedLLM, tool_call
from chatagent.agents import (
    ArticleAgent,
    BasicDocQA,
    DialogueRetrievalAgent,
    DialogueSimulator,
    GroupChatAutoRouter,
    GroupChatCreator,
    HumanSimulator,
    MultiAgentHub,
    ParallelDocQA,
    ReActChat,
    TIRMathAgent,
    VirtualMemoryAgent,
    WriteFromScratch,
)
from chatagent.agents.file_excerpts import Memory
from chatagent.rag.store import DocStore
from chatagent.schema.stream import merge_delta
from chatagent.tools.sandbox import bwrap_path

GUIDE = "Image guide.\n\nTo flip an image horizontally, use ImageOps.mirror(image).\n\nTo rotate it, use rotate(90)."
FILLER = "The committee reviewed the quarterly figures and noted steady progress in every region. "


@pytest.fixture
def guide(tmp_path: Path) -> str:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    return str(path)


@pytest.fixture
def report(tmp_path: Path) -> str:
    """A long document: ten sections, the fact in the seventh."""
    sections = [f"## Section {i}\n\n" + FILLER * 40 for i in range(1, 11)]
    sections[6] += "\n\nThe vault code is 4242."
    path = tmp_path / "report.md"
    path.write_text("\n\n".join(sections))
    return str(path)


def store(tmp_path: Path) -> DocStore:
    return DocStore(tmp_path / "store")


def ask(text: str, *files: str) -> list[dict]:
    return [{"role": "user", "content": [{"text": text}] + [{"file": f} for f in files]}]


# ---- Memory and document QA ----------------------------------------------------------------------------------


def test_memory_gives_the_excerpts_of_the_files_as_json(guide, tmp_path):
    mem = Memory(files=[guide], rag_cfg={"store": store(tmp_path), "parser_page_size": 300})
    *_, last = mem.run([{"role": "user", "content": "How do I flip an image?"}])
    found = json.loads(last[-1]["content"])
    assert found == [{"url": "guide.md", "text": [GUIDE]}] and last[-1]["name"] == "memory"
    assert [(s["file"], s["pages"]) for s in last[-1]["extra"]["sources"]] == [("guide.md", [1])]
    *_, none = Memory().run([{"role": "user", "content": "hi"}])
    assert none[-1]["content"] == ""
    with pytest.raises(TypeError, match="did you mean 'max_ref_token'"):
        Memory(rag_cfg={"max_ref_tokens": 10})


def test_basic_doc_qa_answers_only_from_the_excerpts(guide, tmp_path):
    llm = ScriptedLLM(["Use ImageOps.mirror."])
    out = BasicDocQA(llm=llm, rag_cfg={"store": store(tmp_path)}).run_nonstream(ask("How to flip?", guide))
    assert out[-1]["content"] == "Use ImageOps.mirror." and out[-1]["name"] == "Basic DocQA"
    prompt = llm.calls[0].messages
    assert "from them alone" in prompt[0].content and "ImageOps.mirror(image)" in prompt[-1].text


def test_parallel_doc_qa_reads_every_part_at_once_and_answers_from_what_was_found(openai_server, report, tmp_path):
    """The first three members' requests meet at a barrier: sent one after another, the first would wait in vain."""
    from chatagent.agents.doc_qa.parallel_doc_qa import PART_TOKENS, parts

    llm = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    bot = ParallelDocQA(llm=llm, rag_cfg={"store": store(tmp_path)}, max_workers=3)
    n = len(parts(bot.store.load([report])[0], PART_TOKENS))
    assert n > 3
    barrier = threading.Barrier(3, timeout=20)
    arrived = []

    def reply(request):
        prompt = request.json["messages"][-1]["content"]
        if "<None>" not in prompt:  # not a member: the final answer
            return "The vault code is 4242 [report.md, p. 1]."
        arrived.append(1)
        if len(arrived) <= 3:
            barrier.wait()
        found = "4242" in prompt.split("# Question")[0]
        return json.dumps(
            {"res": "ans", "content": "The code is 4242."} if found else {"res": "none", "content": "<None>"}
        )

    openai_server.add(*[reply] * (n + 1))
    run = bot.run(ask("What is the vault code?", report))
    out = list(run)[-1]
    assert out[-1]["content"] == "The vault code is 4242 [report.md, p. 1]."
    assert out[-1]["extra"]["parts_answered"] == 1 and out[-1]["extra"]["sources"]
    final = openai_server.requests[-1].json["messages"][0]["content"]
    assert "The code is 4242." in final.split("## What the readers found")[1]
    assert "4242" in final.split("## What the readers found")[0]  # the excerpts chosen with the readers' answers
    assert run.usage.calls == n + 1 and len(openai_server.requests) == n + 1


def test_virtual_memory_keeps_only_the_latest_search_in_its_context(guide, tmp_path):
    llm = ScriptedLLM(
        [
            tool_call("retrieval", {"query": "flip"}),
            tool_call("retrieval", {"query": "rotate"}),
            "Mirror it, then rotate(90).",
        ]
    )
    small_chunks = DocStore(tmp_path / "store", chunk_tokens=16, overlap_tokens=0)
    bot = VirtualMemoryAgent(llm=llm, files=[guide], rag_cfg={"store": small_chunks, "max_ref_token": 30})
    out = bot.run_nonstream([{"role": "user", "content": "Flip then rotate?"}])
    assert [m["role"] for m in out] == ["assistant", "function", "assistant", "function", "assistant"]
    assert out[1]["content"].startswith("The excerpts found are now in the system message")
    third = llm.calls[2].messages
    assert third[0].role == "system" and third[0].content.count("# Excerpts from the user's files") == 1
    assert "rotate(90)" in third[0].content and "ImageOps" not in third[0].content  # the first search's excerpt is gone
    assert "ImageOps" in llm.calls[1].messages[0].content and all("ImageOps" not in m.text for m in third[1:])


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_tir_math_runs_the_programs_and_continues_the_same_message():
    llm = ScriptedLLM(
        [
            Reply(text="Compute:\n```python\nprint(2 ** 10)\n```\n```output\n999\n```", chunk_size=3),
            "So \\boxed{1024}.",
        ]
    )
    bot = TIRMathAgent(llm=llm, code_interpreter={"timeout": 20, "sandbox": "bwrap"})
    deltas = list(bot.run([{"role": "user", "content": "2^10?"}], delta_stream=True))
    full: list = []
    for d in deltas:
        merge_delta(full, d)
    assert len(full) == 1
    assert full[0]["content"] == "Compute:\n```python\nprint(2 ** 10)\n```\n```output\n1024\n```\nSo \\boxed{1024}."
    assert llm.calls[1].messages[-1].role == "assistant" and llm.calls[1].messages[-1].content.endswith("1024\n```\n")
    assert "```output" in llm.calls[0].generate_cfg["stop"]


# ---- simulators, long dialogues, writers --------------------------------------------------------------------


def test_human_simulator_and_dialogue_simulator():
    user = HumanSimulator(llm=ScriptedLLM(['["Q1?", "Q2?", "Q3?"]', "not json"]), seed=7)
    bot = BasicAgent(llm=ScriptedLLM(["A1."]), name="bot")
    out = DialogueSimulator(user_agent=user, assistant_agent=bot, max_round=5).run_nonstream([])
    import random

    first = random.Random(7).choice(["Q1?", "Q2?", "Q3?"])
    assert [(m.role, m.content) for m in out] == [("user", first), ("assistant", "A1.")]
    assert "You should output a JSON list" in user.llm.calls[0].messages[0].content
    assert user.llm.calls[1].messages[-1].role == "user" and user.llm.calls[1].messages[-1].content == "A1."


def test_dialogue_retrieval_answers_from_the_saved_conversation(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path / "ws"))
    history = [{"role": "user", "content": f"Note {i}: {FILLER}"} for i in range(30)]
    history += [{"role": "assistant", "content": "We agreed the budget is 12,000 euros."}]
    long = FILLER * 20 + "\nWhat did we agree the budget is?"
    llm = ScriptedLLM(["What did we agree the budget is?", "12,000 euros."])
    bot = DialogueRetrievalAgent(llm=llm, rag_cfg={"store": store(tmp_path), "max_ref_token": 300})
    out = bot.run_nonstream(history + [{"role": "user", "content": long}])
    assert [(m["role"], m["content"]) for m in out] == [("assistant", "12,000 euros.")]
    assert "<Given Text>" in llm.calls[0].messages[0].content
    answer_prompt = llm.calls[1].messages
    assert "12,000 euros" in answer_prompt[-1].text and len(answer_prompt) == 2
    saved = list((tmp_path / "ws" / "dialogues").glob("dialogue_*.txt"))
    assert len(saved) == 1 and "We agreed the budget" in saved[0].read_text()


def test_write_from_scratch_summary_outline_sections():
    llm = ScriptedLLM(["Bikes summary.", "I. Origins\n  - early\nII. Today", "Origins text.", "Today text."])
    out = WriteFromScratch(llm=llm).run_nonstream([{"role": "user", "content": "Bicycles"}], knowledge="Notes.")
    assert [m["content"] for m in out][1:] == [
        ">\n> Summarize Browse Content: \n", "Bikes summary.", ">\n> Generate Outline: \n", "I. Origins\n  - early\nII. Today",
        ">\n> Writing Text: \n", ">\n# ", "Origins text.", ">\n# ", "Today text.",
    ]  # fmt: skip
    assert "Notes." in llm.calls[0].messages[0].content and "Bikes summary." in llm.calls[1].messages[-1].content
    assert (
        "I. Origins" in llm.calls[2].messages[-1].content
        and "Stop before writing II. Today" in llm.calls[2].messages[-1].content
    )


def test_article_agent_continues_or_writes_a_whole_article(guide, tmp_path):
    llm = ScriptedLLM(["then mirror it.", "S.", "I. One", "One text."])
    bot = ArticleAgent(llm=llm, rag_cfg={"store": store(tmp_path)})
    out = bot.run_nonstream(ask("To flip an image", guide))
    assert out[0]["content"].startswith(">\n> Search for relevant information: \n[guide.md, p. 1]")
    assert [m["content"] for m in out[1:]] == [">\n> Writing Text: \n", "then mirror it."]
    full = bot.run_nonstream(ask("Image editing", guide), full_article=True)
    assert full[-1]["content"] == "One text." and full[1]["content"].startswith(">\n> Use Default plans")


# ---- group chats ---------------------------------------------------------------------------------------------


def test_group_chat_creator_streams_its_sections_and_reads_its_own_history():
    config = {"name": "Pro", "description": "argues for", "instructions": "You argue for."}
    text = f"<Background>: A debate.\n<Config>: {json.dumps(config)}\n<Config>: {{not json\n<Answer>: More roles?"
    llm = ScriptedLLM([Reply(text=text, chunk_size=2), "<Answer>: Done."])
    creator = GroupChatCreator(llm=llm, name="creator")
    deltas = list(creator.run([{"role": "user", "content": "a debate"}], delta_stream=True))
    full: list = []
    for d in deltas:
        merge_delta(full, d)
    assert [(m.get("name"), m["content"]) for m in full] == [
        ("background", "A debate.\n"), ("role_config", json.dumps(config)), ("creator", "More roles?"),
    ]  # fmt: skip
    assert sum(1 for d in deltas for m in d if m.get("name") == "background") > 3  # streamed, not at the end
    history = [{"role": "user", "content": "a debate"}] + full + [{"role": "user", "content": "no"}]
    assert creator.run_nonstream(history)[-1]["content"] == "Done."
    seen = llm.calls[1].messages
    assert seen[2].role == "assistant" and seen[2].content.startswith("<Background>: A debate.")
    assert "<Config>: " in seen[2].content and seen[2].content.endswith("<Answer>: More roles?")


def test_group_chat_auto_router_names_the_next_speaker():
    alice = BasicAgent(llm=ScriptedLLM([]), name="Alice", description="likes tabs")
    bob = BasicAgent(llm=ScriptedLLM([]), name="Bob", description="likes spaces")
    host = GroupChatAutoRouter(llm=ScriptedLLM(["**Bob**", "[STOP]"]), agents=[alice, bob], background="Style.")
    conversation = [
        {"role": "user", "content": "Tabs?", "name": "Carol"},
        {"role": "assistant", "content": "Yes", "name": "Alice"},
    ]
    assert host.choose(conversation) == "Bob"
    prompt = host.llm.calls[0].messages[-1].content
    assert "- Alice: likes tabs" in prompt and "Carol: Tabs?\nAlice: Yes" in prompt and "Background: Style." in prompt
    assert host.choose(conversation) is None


def test_multi_agent_hub_checks_its_agents():
    class Panel(Agent, MultiAgentHub):
        def __init__(self, agents, **kwargs):
            super().__init__(**kwargs)
            self._agents = agents

        def _run(self, messages, lang="en", **kwargs):
            yield from ()

    a, b = BasicAgent(llm=ScriptedLLM([]), name="a"), BasicAgent(llm=ScriptedLLM([]), name="b")
    assert Panel([a, b]).agent_names == ["a", "b"]
    with pytest.raises(ValueError, match="two agents are called 'a'"):
        _ = Panel([a, a]).agents
    with pytest.raises(ValueError, match="at least one agent"):
        _ = Panel([]).agents


def test_react_transcript_streams_one_growing_message():
    def population(city: str) -> str:
        """Population of a city."""
        return "2.1 million"

    llm = ScriptedLLM(
        [
            Reply(text='Thought: look it up\nAction: population\nAction Input: {"city": "Paris"}', chunk_size=3),
            Reply(text="Thought: done\nFinal Answer: About 2.1 million.", chunk_size=3),
        ]
    )
    yields = list(ReActChat(llm=llm, function_list=[population]).run([{"role": "user", "content": "?"}]))
    assert all(len(y) == 1 for y in yields)
    texts = [y[0]["content"] for y in yields]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
    assert texts[-1] == (
        'Thought: look it up\nAction: population\nAction Input: {"city": "Paris"}\nObservation: 2.1 million\n'
        "Thought: done\nFinal Answer: About 2.1 million."
    )
