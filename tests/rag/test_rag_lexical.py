"""The lexical side of search: compounds written open or closed, the sentences of a passage that match a query,
and which text a question in a conversation is searched as."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatagent.rag import DocStore, Index
from chatagent.rag.followup import names_nothing, refers_back, search_query
from chatagent.rag.highlight import best_sentences, sentence_spans

pytestmark = pytest.mark.timeout(60)

PLOTS = [
    "The plot function draws points, lines or text; its type argument says which.",
    "Graphical parameters such as the plot margins are set with par before the plot is made.",
    "Seeds scatter in the wind; that use of the word has nothing to do with graphics.",
    "A scatterplot shows two numeric variables against each other, one point per observation.",
    "Histograms summarise one variable; boxplots compare the spread of several groups.",
]


def ranked(index: Index, query: str) -> list[int]:
    return [int(i) for i, _ in index.search(query, top_k=5)]


def test_an_open_compound_in_the_query_finds_the_closed_one_in_the_text() -> None:
    index = Index()
    index.add_texts([str(i) for i in range(len(PLOTS))], PLOTS)
    assert ranked(index, "How do I draw a scatter plot?")[0] == 3
    assert ranked(index, "scatter-plot of two variables")[0] == 3


def test_a_closed_compound_in_the_query_finds_the_open_one_in_the_text() -> None:
    texts = [
        "Use a scatter plot to show how two measurements vary together.",
        "A data frame holds columns of equal length; read.table returns one.",
        "Plot margins and other graphical parameters are set with par.",
    ]
    index = Index()
    index.add_texts(["0", "1", "2"], texts)
    assert ranked(index, "scatterplot")[0] == 0
    assert ranked(index, "How do I make a dataframe?")[0] == 1
    # a word the text never splits adds nothing: "therefore" is not "the" + "refore"
    assert index.query_terms("therefore") == ["therefor"]


def test_the_matching_sentences_of_a_passage_are_picked_in_order() -> None:
    text = (
        "4 Ordered and unordered factors\n"
        "A factor is a vector object used to specify a discrete classification (grouping) of the components\n"
        "of other vectors of the same length. R provides both ordered and unordered factors.\n"
        "> statef <- factor(state)\n"
        "The print() function handles them slightly differently from other objects."
    )
    spans = best_sentences(text, "What is a factor?")
    picked = [text[a:b] for a, b in spans]
    assert picked[1].startswith("A factor is a vector object") and picked[1].endswith("of the same length.")
    assert len(picked) == 3 and all("factor" in p for p in picked)  # the best and the next best, at most 3
    assert [text[a:b] for a, b in best_sentences(text, "What does print show?")] == [
        "The print() function handles them slightly differently from other objects."
    ]
    assert best_sentences(text, "How do I install a package?") == []
    # a line break inside a sentence (the next line starts in lower case) does not end it
    lines = "one\ntwo.\nThree"
    assert [lines[a:b] for a, b in sentence_spans(lines)] == ["one\ntwo.", "Three"]


def test_a_passage_highlights_a_compound_written_the_other_way() -> None:
    text = "Histograms come first. A scatterplot shows two variables. Boxplots come last."
    assert [text[a:b] for a, b in best_sentences(text, "scatter plot")] == ["A scatterplot shows two variables."]


def test_what_a_question_refers_to() -> None:
    assert names_nothing("Can you show an example?") and names_nothing("Why?") and names_nothing("Tell me more.")
    assert not names_nothing("What is a factor?")
    assert refers_back("How do I plot it?") and refers_back("And for a data frame?") and refers_back("那例子呢？")
    assert not refers_back("What is a factor?") and not refers_back("How do I read data from a file?")


@pytest.fixture
def manual_index(tmp_path: Path):
    sections = {
        "reading": "To read data from a file use read.table; each line of the file becomes a row of a data frame. "
        "The first line may hold the variable names. scan reads a file into a vector.",
        "factors": "A factor is a vector object used to specify a discrete classification of the components of "
        "other vectors. Levels of a factor are found with levels.",
        "frames": "A data frame is a list of vectors of equal length. read.table reads a file into a data frame, "
        "and the columns of a data frame can be of different types.",
        "plots": "The plot function makes a scatter of points. Graphics devices hold the plots.",
    }
    filler = "\n\n".join(f"Section {n} talks about nothing in particular, page after page." for n in range(30))
    path = tmp_path / "manual.txt"
    path.write_text(filler + "\n\n" + "\n\n".join(sections.values()), encoding="utf-8")
    index, errors = DocStore(tmp_path / "ws", chunk_tokens=60, overlap_tokens=0).load([path])
    assert not errors
    return index


def test_a_short_question_that_stands_alone_is_searched_alone(manual_index) -> None:
    before = "How do I read data from a file?"
    assert search_query("What is a factor?", before, manual_index) == "What is a factor?"
    assert search_query("Can you show an example?", before, manual_index) == before
    assert search_query("What is a factor?", None, manual_index) == "What is a factor?"


def test_a_question_that_refers_back_keeps_the_better_search(manual_index) -> None:
    before = "How do I read data from a file?"
    # both ways: the joint search's best hit (data frames read from files) answers "data frame" as well
    assert search_query("And into a data frame?", before, manual_index) == f"{before}\n" + "And into a data frame?"
    # the joint search's best hit is about reading files, not about levels: the question alone wins
    assert search_query("And what are the levels of that factor?", before, manual_index).startswith("And what")


GLM_PAGES = [
    "Statistical models in R. A model is fitted with a fitting function; the formula says which model to fit. "
    "Every fitted model can be printed, summarised and plotted, and the family of a model says its error "
    "distribution. Models are fitted to data frames.",
    "Generalized linear models. To fit such a model, give the family and the link. Fitting a model with the "
    "wrong family gives a poor fit, so look at the residuals of every fitted model. For logistic regression "
    "use glm(y ~ x, family = binomial) on a response of zeros and ones.",
    "Nonlinear models are fitted by least squares with nls; the model is fitted from starting values and every "
    "fit reports its residual sum of squares. A fitted model of this family converges or fails.",
]


def test_the_first_source_shows_the_sentence_with_the_questions_rare_words(tmp_path: Path) -> None:
    """Issue 43.13: every page says "fit", "model" and "family"; the sentence a question about a binomial family
    needs holds "binomial", rare in the manual. Counted alike, the common words won the snippet (and the
    passage's highlights); weighed by how rare they are in the files, the sentence with glm(..., binomial) does."""
    from chatagent import Assistant, ScriptedLLM
    from tests.support.documents import make_pdf

    make_pdf(GLM_PAGES, tmp_path / "models.pdf")
    store = DocStore(tmp_path / "ws", embedder=None)
    bot = Assistant(llm=ScriptedLLM(["See glm."]), files=[str(tmp_path / "models.pdf")],
                    rag_cfg={"store": store, "passage_first": True})  # fmt: skip
    extra = bot.run_nonstream(
        [{"role": "user", "content": "How do I fit a generalized linear model with a binomial family?"}]
    )[-1]["extra"]
    assert extra["sources"][0]["pages"] == [2] and "binomial" in extra["sources"][0]["text"], extra["sources"][0]
    passage = extra["passage"]
    assert any("binomial" in passage["text"][a:b] for a, b in passage["highlights"])


def test_a_name_s_letter_and_a_word_find_the_closed_compound() -> None:
    """ "R script" is how a question writes Rscript (a name's capital letter and a word, joined)."""
    texts = ["Rscript runs a file of R commands from the shell.", "A script is a text file of commands you run."]
    index = Index(embedder=None)
    index.add_texts(["0", "1"], texts)
    assert "rscript" in index.query_terms("How do I run an R script?")
    assert "ihav" not in index.query_terms("I have a script") and ranked(index, "How do I run an R script?")[0] == 0
