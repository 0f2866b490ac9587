"""Index: BM25 scoring (checked against rank-bm25), English and Chinese analysis, titles, links, saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chatagent.rag import Index, analyze

pytestmark = pytest.mark.timeout(60)

ENGLISH = {
    "cats": "Cats are small carnivorous mammals; a cat sleeps most of the day.",
    "dogs": "Dogs were domesticated from wolves and are loyal companions that love running.",
    "python": "Python is a programming language; installing packages uses pip install.",
    "r": "In R you install packages with install.packages and load them with library.",
    "ocean": "The ocean covers most of the planet and holds the majority of its water.",
}
CHINESE = {
    "panda": "大熊猫是中国特有的哺乳动物，主要以竹子为食，生活在四川的山区。",
    "tea": "龙井茶产于浙江杭州西湖一带，是中国著名的绿茶之一。",
    "rail": "京沪高速铁路连接北京和上海，全长一千三百多公里，于二零一一年通车。",
    "game": "《战国无双3》是由光荣和ω-force合作开发的动作游戏。",
}


def build(docs: dict[str, str], **kwargs: object) -> Index:
    index = Index(**kwargs)  # type: ignore[arg-type]
    index.add_texts(list(docs), list(docs.values()))
    return index


def test_english_search_with_stemming_and_stop_words() -> None:
    index = build(ENGLISH)
    assert index.search("How do I install packages in R?", top_k=2)[0][0] == "r"
    assert index.search("running dog")[0][0] == "dogs"  # stems: running -> run, dog(s) -> dog
    assert index.search("cat")[0][0] == "cats"
    assert index.search("the of and is") == []  # only stop words: nothing matches
    assert index.search("zeppelin") == []
    hits = index.search("install packages", top_k=10)
    assert [h[0] for h in hits][:2] in (["r", "python"], ["python", "r"])
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:], strict=False))
    assert len(index.search("install packages water cats dogs", top_k=3)) == 3


def test_chinese_and_mixed_search() -> None:
    index = build({**CHINESE, **ENGLISH})
    assert index.search("大熊猫吃什么？")[0][0] == "panda"
    assert index.search("哪条高铁连接北京和上海")[0][0] == "rail"
    assert index.search("战国无双3是哪两个公司开发的")[0][0] == "game"
    assert index.search("西湖的绿茶")[0][0] == "tea"
    assert index.search("ocean water")[0][0] == "ocean"


def test_analysis_of_english_and_chinese() -> None:
    assert analyze("The cats were running quickly") == ["cat", "run", "quick"]
    assert analyze("大熊猫的竹子") == ["大熊", "熊猫", "竹子"]  # split at 的, then bigrams
    assert analyze("Python3 和 R语言") == ["python3", "r", "语言"]
    assert analyze("don't O'Neil") == ["oneil"]


def test_okapi_mode_gives_rank_bm25_scores() -> None:
    from rank_bm25 import BM25Okapi

    texts = list(ENGLISH.values()) + list(CHINESE.values())
    corpus = [analyze(t) for t in texts]
    index = Index(idf="okapi", k1=1.5, b=0.75, epsilon=0.25, link_depth=0)
    index.add_terms(list(range(len(texts))), corpus)
    reference = BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0.25)
    for query in ("install packages", "大熊猫 竹子 北京", "ocean water cats", "nothing here"):
        np.testing.assert_allclose(index.scores(query), reference.get_scores(analyze(query)), rtol=1e-9, atol=1e-12)


def test_lucene_idf_finds_terms_in_tiny_collections() -> None:
    one = build({"only": "a single document about llamas"})
    assert one.search("llamas") == [("only", pytest.approx(one.search("llamas")[0][1]))]
    assert one.search("llamas")[0][1] > 0
    two = build({"a": "llamas and alpacas", "b": "llamas only"})
    assert {h[0] for h in two.search("llamas")} == {"a", "b"}  # okapi would score a term in every doc at 0


def test_titles_lift_documents_about_what_the_query_names() -> None:
    texts = ["He was born in 1950 and studied law.", "She was born in 1950 and studied medicine."]
    index = Index()
    index.add_texts(["x", "y"], texts, titles=["John Smith", "Mary Jones"])
    assert index.search("When was Mary Jones born?")[0][0] == "y"
    assert index.search("When was John Smith born?")[0][0] == "x"


def test_documents_named_by_the_best_hit_are_lifted() -> None:
    docs = {
        "film": ("Maximum Overdrive", "A 1986 horror film directed by Stephen King, his only film as director."),
        "town": ("Leland, North Carolina", "Leland is a town where the film Maximum Overdrive was shot in 1986."),
        "noise1": ("Wilmington", "Wilmington is a port city in North Carolina with film studios."),
        "noise2": ("Carolina beaches", "North Carolina has many beaches visited in 1986 by tourists."),
    }
    query = "Who directed the film that was shot in Leland, North Carolina in 1986?"
    plain = Index(link_depth=0)
    linked = Index()
    for index in (plain, linked):
        index.add_texts(list(docs), [t for _, t in docs.values()], titles=[t for t, _ in docs.values()])
    assert linked.search(query)[0][0] == "town"
    rank = [h[0] for h in linked.search(query)].index("film")
    assert rank == 1
    assert linked.search(query)[1][1] > dict(plain.search(query))["film"]


def test_saved_index_searches_the_same_and_is_read_only(tmp_path: Path) -> None:
    index = Index()
    index.add_texts(list(ENGLISH) + list(CHINESE), list(ENGLISH.values()) + list(CHINESE.values()),
                    titles=list(ENGLISH) + [None] * len(CHINESE))  # fmt: skip
    data = index.to_bytes()
    loaded = Index.from_bytes(data)
    for query in ("install packages", "大熊猫", "cats dogs", "python"):
        assert loaded.search(query) == index.search(query)
    with pytest.raises(RuntimeError):
        loaded.add_texts(["new"], ["text"])
    with pytest.raises(ValueError):
        Index.from_bytes(b"not an index")
    with pytest.raises(ValueError):
        Index.from_bytes(data[: len(data) // 2])


def test_incremental_adds_and_bad_arguments() -> None:
    index = Index()
    index.add_texts(["a"], ["alpha text"])
    assert index.search("alpha")[0][0] == "a"
    index.add_texts(["b"], ["beta text"])  # the index is rebuilt on the next search
    assert index.search("beta")[0][0] == "b" and len(index) == 2
    assert index.search("alpha", top_k=0) == []
    with pytest.raises(ValueError):
        index.add_texts(["c"], ["one", "two"])
    with pytest.raises(ValueError):
        Index(lang="fr")
    assert Index().search("anything") == []


@pytest.mark.timeout(120)
def test_jieba_mode_keeps_its_dictionary_cache_in_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chatagent.rag.analysis as analysis

    monkeypatch.setenv("CHATAGENT_WORKSPACE", str(tmp_path))
    monkeypatch.setattr(analysis, "_jieba_tokenizer", None)
    index = build(CHINESE, lang="zh")
    assert index.search("大熊猫吃竹子")[0][0] == "panda"
    assert "熊猫" in analysis.jieba_analyze("大熊猫吃竹子")
    assert list((tmp_path / "jieba").glob("jieba*.cache"))


def test_generic_titles_are_not_links() -> None:
    index = Index()
    ids = ["hit"] + [f"intro{i}" for i in range(5)] + ["water"] + [f"w{i}" for i in range(30)]
    texts = (
        ["The reactor manual starts with an introduction and mentions water cooling."]
        + [f"Chapter {i} opening remarks." for i in range(5)]
        + ["Water is a liquid."]
        + [f"Page {i} mentions water in passing." for i in range(30)]
    )
    titles = ["Reactor"] + ["Introduction"] * 5 + ["Water"] + [f"Page {i}" for i in range(30)]
    index.add_texts(ids, texts, titles=titles)
    found = [h[0] for h in index.search("reactor manual", top_k=10)]
    assert found == ["hit"]  # neither the five "Introduction"s nor the common word "Water" is lifted
