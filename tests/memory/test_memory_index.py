"""Recall's index at size (issue 43.2): it follows the store's changes one at a time, whichever process made them,
scores as a fresh index would, is saved for the next process (which then reads only the changes since), forgets
what was forgotten, and above EXACT records ranks as the exact search does. Vectors here are trigram hashes
(tests/support/embeddings.py): this is about the index, not the model."""

from __future__ import annotations

import json
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np

from chatagent import LongTermMemory
from chatagent.memories import indexes, recall, rows, snapshot
from chatagent.memories.keywords import Keywords
from chatagent.memories.records import MemoryRecord
from chatagent.memories.rows import Rows
from chatagent.memories.store import MemoryStore
from chatagent.rag.analysis import analyze
from chatagent.rag.index import Index
from tests.support import processes
from tests.support.embeddings import toy_vector

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "peanut",
    "allergy",
    "cello",
    "lisbon",
    "flight",
    "sister",
    "wedding",
    "garden",
    "tomato",
    "bike",
    "train",
    "paris",
    "rain",
    "coffee",
    "tea",
    "dog",
]


class ToyEmbedder:
    name = "toy"

    def embed_passages(self, texts) -> np.ndarray:
        return np.array([toy_vector(t) for t in texts], dtype=np.float32)

    embed_queries = embed_passages


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) + f" note {i}" for i in range(n)]


def fill(store: MemoryStore, user: str, items: list[str], start: float = 1_700_000_000) -> list[MemoryRecord]:
    """Records with their (toy) vectors, stored in one go as bench/memory.py does."""
    records = [
        MemoryRecord(uuid.uuid4().hex, user, t, "", 0.5, {"n": i}, start + i * 60, start + i * 60)
        for i, t in enumerate(items)
    ]
    vectors = [np.asarray(toy_vector(t), dtype=np.float16).tobytes() for t in items]
    store.add(records, "toy", vectors)
    return records


def ranked(mem: LongTermMemory, queries: list[str], k: int = 5) -> list[list[str]]:
    return [[m.record.id for m in mem.recall(q, k=k)] for q in queries]


def test_keyword_scores_follow_additions_and_removals_as_a_fresh_index_scores() -> None:
    docs = texts(300)
    keywords = Keywords()
    for d in docs:
        keywords.add(keywords.analyze(d))
    gone = list(range(0, 300, 7))
    for at in gone:
        keywords.remove(at)
    for d in texts(40, seed=1):  # added after: in the recent postings until compaction
        keywords.add(keywords.analyze(d))
    kept = [i for i in range(340) if i not in gone]
    fresh = Index(embedder=None)
    fresh.add_texts(kept, [(docs + texts(40, seed=1))[i] for i in kept])
    for query in ("peanut allergy", "lisbon flight in the rain", "note 12", "garden tomatoes"):
        ours = keywords.scores(query)
        assert np.allclose(ours[kept], fresh.scores(query), atol=1e-9), query
        assert not ours[gone].any()
        keywords.compact()
        assert np.allclose(keywords.scores(query)[kept], fresh.scores(query), atol=1e-9), query


def test_a_long_lived_index_follows_another_process_as_a_fresh_one_ranks(tmp_path: Path) -> None:
    """Changes made elsewhere (records added, a text changed, records forgotten, vectors stored) reach a memory's
    index through the store's changes, and it ranks as one built from scratch."""
    url = str(tmp_path / "m.db")
    store = MemoryStore(url)
    records = fill(store, "alice", texts(200))
    mem = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    queries = ["peanut allergy", "a flight to lisbon", "my sister's wedding", "note 150"]
    ranked(mem, queries)  # built now; what follows comes through the store
    other = MemoryStore(url)  # as another process would write
    fill(other, "alice", texts(30, seed=2), start=1_800_000_000)
    other.update("alice", records[5].id, "The pangolin learned to ride a unicycle.", 0.9, 1_800_000_100)
    other.delete("alice", [r.id for r in records[10:20]])
    other.add([MemoryRecord(uuid.uuid4().hex, "alice", "Coffee with my sister in Paris.", "", 0.7, {}, 1.8e9, 1.8e9)])
    mem.wait_for_vectors(60)
    seen = ranked(mem, queries + ["pangolin on a unicycle"])
    fresh = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    indexes._indexes.clear()  # a new process: nothing in memory
    assert ranked(fresh, queries + ["pangolin on a unicycle"]) == seen
    assert seen[-1][0] == records[5].id
    assert not {r.id for r in records[10:20]} & {rid for ids in seen for rid in ids}


CHILD = """
import json, sys
from chatagent import LongTermMemory
from chatagent.memories.store import MemoryStore
asked = []
changes = MemoryStore.changes
def counted(self, user, since=0):
    asked.append(since)
    return changes(self, user, since)
MemoryStore.changes = counted
from tests.memory.test_memory_index import ToyEmbedder
mem = LongTermMemory(user="alice", store=sys.argv[1], embedder=ToyEmbedder())
print(json.dumps([asked, [m.record.text for m in mem.recall(sys.argv[2], k=3)], asked]))
"""


def test_a_new_process_starts_from_the_saved_index_and_reads_only_what_changed(tmp_path: Path) -> None:
    url = str(tmp_path / "m.db")
    store = MemoryStore(url)
    fill(store, "alice", texts(snapshot.SAVE_FROM + 50))
    mem = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    mem.recall("warm up")
    path = snapshot.snapshot_path(store.url, store.path, "alice", "toy")
    deadline = time.monotonic() + 60
    while not path.exists():  # saved on a thread of its own
        assert time.monotonic() < deadline, "the index was not saved"
        time.sleep(0.05)
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o077 == 0
    saved_at = store.version("alice")
    fill(store, "alice", ["A red kite over the garden."], start=1_900_000_000)

    def child(query: str) -> list:
        out = processes.run([sys.executable, "-c", textwrap.dedent(CHILD), url, query],
                            capture_output=True, text=True, timeout=120, cwd=REPO)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.splitlines()[-1])

    _, found, asked = child("red kite garden")
    assert asked == [saved_at]  # the records changed since the saved version, not all of them
    assert found[0] == "A red kite over the garden."
    path.write_bytes(b"not an index")  # unreadable: ignored, built again from the store
    _, found, asked = child("red kite garden")
    assert asked == [0] and found[0] == "A red kite over the garden."


def test_a_loaded_index_reads_the_vectors_and_terms_a_recall_needs_not_every_records(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 43.2: a new process's first recall at 100k records took 1.66 s loading the saved index (every vector
    made float32, an array of terms and a set per record, the sign bits made again from every vector). Now it is a
    memory map read where a recall looks: above EXACT, the candidates' and the sample's vectors; a record stored
    meanwhile costs its own terms."""
    monkeypatch.setattr(recall, "EXACT", 300)  # the two-step search, on a small store
    monkeypatch.setattr(recall, "CANDIDATES", 40)
    monkeypatch.setattr(recall, "KEYWORD_CANDIDATES", 20)
    monkeypatch.setattr(recall, "SAMPLE", 60)
    monkeypatch.setattr(rows, "MERGE_BELOW", 100)  # the saved vectors stay in their file
    url = str(tmp_path / "m.db")
    store = MemoryStore(url)
    fill(store, "alice", texts(snapshot.SAVE_FROM + 200))
    mem = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    queries = ["peanut allergy", "a flight to lisbon", "note 1050", "red kite garden"]
    path = snapshot.snapshot_path(store.url, store.path, "alice", "toy")
    snapshot.save(mem._index(), path, store.epoch, "alice")
    fill(store, "alice", ["A red kite over the garden."], start=1_900_000_000)  # stored after the save
    seen = ranked(mem, queries)
    taken: list[int] = []
    read_through: list[int] = []
    take, chunks = Rows.take, Rows.chunks
    monkeypatch.setattr(Rows, "take", lambda self, positions: taken.append(len(positions)) or take(self, positions))
    monkeypatch.setattr(Rows, "chunks", lambda self, n, **kw: read_through.append(n) or chunks(self, n, **kw))
    analyzed: list[str] = []
    monkeypatch.setattr(Keywords, "analyze", staticmethod(lambda text: analyzed.append(text) or analyze(text)))
    indexes._indexes.clear()  # a new process
    assert ranked(mem, queries) == seen
    assert read_through == [] and 0 < sum(taken) <= len(queries) * (40 + 20 + 60)  # of 1,201 records' vectors
    assert analyzed == ["A red kite over the garden."]  # the saved records' terms are not made again
    index = mem._index()
    assert len(index.keywords.added) == 1 and index.vectors is not None and not index.vectors.blocks[0].flags.owndata


def test_a_text_said_many_times_is_one_candidate_as_the_changes_come(tmp_path: Path) -> None:
    """The latest record of each text (and of each text in each scope) is elected again for the texts a change
    touches, and the index agrees with one built from scratch after each change."""
    url = str(tmp_path / "m.db")
    store = MemoryStore(url)
    said = ["I walk the dog.", "i walk  the DOG.", "Tea at five.", "I walk the dog."]
    records = [
        MemoryRecord(uuid.uuid4().hex, "alice", said[i % 4], ["", "home"][i % 3 == 0], 0.5, {}, 1.7e9 + i, 1.7e9 + i)
        for i in range(12)
    ]
    store.add(records)
    mem = LongTermMemory(user="alice", store=url, embedder=None)

    def candidates(index: recall.UserIndex) -> tuple[set[str], set[str]]:
        n = len(index.ids)
        return ({index.ids[i] for i in np.flatnonzero(index.distinct[:n])},
                {index.ids[i] for i in np.flatnonzero(index.distinct_in_scope[:n])})  # fmt: skip

    def agrees() -> tuple[set[str], set[str]]:
        ours = candidates(mem._index())
        fresh = recall.UserIndex(None)
        latest, changed, _ = store.changes("alice")
        fresh.apply(latest, [indexes.Row(*row) for row in changed], [])
        assert ours == candidates(fresh)
        return ours

    latest, in_scope = agrees()
    assert len(latest) == 2 and len(in_scope) == 4  # the dog and the tea; each in "" and "home"
    store.update("alice", records[11].id, "Tea at six.", 0.5, 1.8e9)  # the latest tea in "" changes its text
    assert records[11].id in agrees()[0]
    store.delete("alice", [records[9].id, records[10].id])  # the latest dog of "home" and of ""
    assert not {records[9].id, records[10].id} & agrees()[1]
    store.add([MemoryRecord(uuid.uuid4().hex, "alice", "I WALK the dog.", "home", 0.9, {}, 1.6e9, 1.6e9)])  # older
    agrees()


def test_forgetting_removes_the_saved_index(tmp_path: Path) -> None:
    """A saved index holds the records' terms and vectors: what is forgotten must not stay there."""
    url = str(tmp_path / "m.db")
    store = MemoryStore(url)
    records = fill(store, "alice", texts(snapshot.SAVE_FROM + 10))
    mem = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    path = snapshot.snapshot_path(store.url, store.path, "alice", "toy")
    snapshot.save(mem._index(), path, store.epoch, "alice")
    assert records[3].id in path.read_bytes().decode("latin-1")
    old = path.with_suffix(".npz")  # the first format's file, in the same place
    old.write_bytes(records[3].id.encode())
    assert mem.forget(records[3].id)
    assert not path.exists() and not old.exists()
    assert records[3].id not in [m.record.id for m in mem.recall(records[3].text, k=10)]


def test_above_exact_the_two_step_search_ranks_as_the_exact_one(tmp_path: Path, monkeypatch) -> None:
    url = str(tmp_path / "m.db")
    fill(MemoryStore(url), "alice", texts(600))
    mem = LongTermMemory(user="alice", store=url, embedder=ToyEmbedder())
    queries = ["peanut allergy", "lisbon flight", "cello and tea", "my dog in the rain", "note 321", "garden bike"]
    exact = ranked(mem, queries, k=5)
    monkeypatch.setattr(recall, "EXACT", 100)  # the same records, searched in two steps
    monkeypatch.setattr(recall, "CANDIDATES", 150)
    monkeypatch.setattr(recall, "KEYWORD_CANDIDATES", 50)
    monkeypatch.setattr(recall, "SAMPLE", 300)
    approximate = ranked(mem, queries, k=5)
    agree = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(exact, approximate, strict=True)])
    assert agree >= 0.9, (exact, approximate)
    assert [a[0] for a in approximate] == [e[0] for e in exact]
    assert [m.record.scope for m in mem.recall("peanut", k=3, scope="work")] == []


class CountingEmbedder(ToyEmbedder):
    """The toy embedder, remembering the questions it was asked to embed."""

    name = "toy-counting"

    def __init__(self) -> None:
        self.questions: list[str] = []

    def embed_queries(self, texts) -> np.ndarray:
        self.questions.extend(texts)
        return self.embed_passages(texts)


def test_a_turn_embeds_its_question_once_for_the_files_and_the_memory(tmp_path: Path) -> None:
    """Issue 43.2: the memory was searched with the excerpts put before the question (a long text to embed,
    and a worse one to match); it is searched with the question, whose vector retrieval made already."""
    from chatagent import Assistant, ScriptedLLM
    from chatagent.rag.store import DocStore
    from tests.support.documents import make_pdf

    make_pdf(["Lisbon trams: line 28 crosses the old town.", "Pastries: try the pastel de nata."], tmp_path / "g.pdf")
    embedder = CountingEmbedder()
    docs = DocStore(workspace=tmp_path / "ws", embedder=embedder)
    index, _ = docs.load([str(tmp_path / "g.pdf")])
    assert index.index.wait_for_vectors(60)  # the files' search is by meaning too
    mem = LongTermMemory(user="alice", store=str(tmp_path / "m.db"), embedder=embedder)
    mem.remember("Alice is allergic to peanuts.")
    assert mem.wait_for_vectors(60)
    bot = Assistant(llm=ScriptedLLM(["Try the tram."]), files=[str(tmp_path / "g.pdf")], rag_cfg={"store": docs},
                    memory=mem)  # fmt: skip
    question = "Which tram line should I take in Lisbon?"
    bot.run_nonstream([{"role": "user", "content": question}])
    assert embedder.questions == [question]
