"""Text analysis for keyword search: text -> index terms, for English, Chinese and mixed text.

Latin-script words are lower-cased, stop words dropped and the rest stemmed (Snowball English);
numbers are kept whole. Runs of CJK characters are split at function characters (的, 了, 是, ...) and the
pieces become overlapping character bigrams (a single character stays a unigram), which needs no
dictionary, costs nothing to load and, on the CMRC2018 evaluation, retrieves as well as jieba's word segmentation at a fraction of the time.

English compounds are written closed, open or hyphenated ("scatterplot", "scatter plot", "scatter-plot"):
`query_terms` adds to a query's terms the other spellings that the index holds, two adjacent words joined
and one word split in two (see its docstring), so that each spelling finds the others.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Container, Iterable
from functools import lru_cache
from typing import Any

from chatagent.utils.extras import missing_dependency
from chatagent.utils.lang import CJK_CHARS
from chatagent.utils.workspace import workspace_dir

_CJK = CJK_CHARS  # kana, CJK ideographs, hangul
_CJK_START = re.compile(f"[{CJK_CHARS}]")
_IS_CJK = re.compile(f"[{_CJK}]")
# A run of CJK characters, or a word or number (with an English clitic: don't, O'Neil).
_TOKENS = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['’][^\W\d_{_CJK}]+)?")

# A common English stop list (the union of the usual short lists), lower case, apostrophes removed.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are aren arent as at be because been before being
    below between both but by can cannot could couldn couldnt did didn didnt do does doesn doesnt doing don dont
    down during each few for from further had hadn hadnt has hasn hasnt have haven havent having he hed hell hes
    her here heres hers herself him himself his how hows i id ill im ive if in into is isn isnt it its itself
    lets me more most mustn mustnt my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan shant she shed shell shes should shouldn shouldnt so some such than that thats the
    their theirs them themselves then there theres these they theyd theyll theyre theyve this those through to
    too under until up very was wasn wasnt we wed well were weve weren werent what whats when whens where wheres
    which while who whos whom why whys will with won wont would wouldn wouldnt you youd youll youre youve your
    yours yourself yourselves also s t just quite""".split()  # noqa: SIM905
)  # "quite" too: an adverb no one searches for, which the stemmer makes "quit"

# Chinese function characters: a CJK run is split at them before bigrams are made, so that no bigram
# straddles a particle (on CMRC2018 this lifts recall@1 from 0.970 to 0.984).
CHINESE_STOP_CHARS: frozenset[str] = frozenset("的了是在和与或及也就都而之其这那有为以于被把让给吗呢吧啊么")
_CJK_SPLIT = re.compile("[" + "".join(sorted(CHINESE_STOP_CHARS)) + "]+")


@lru_cache(maxsize=1)
def _stem_word() -> Callable[[str], str]:
    try:
        import snowballstemmer  # lazy; it uses PyStemmer's C implementation of the same algorithm when installed
    except ModuleNotFoundError as e:
        raise missing_dependency(e, "English word stemming for search") from None

    stem = snowballstemmer.stemmer("english").stemWord
    return lambda word: stem(word) if len(word) > 2 and not word.isdigit() else word


_terms: dict[str, str] = {}  # word as found (lower case) -> its term, '' for a stop word


def _term(word: str) -> str:
    term = _terms.get(word)
    if term is None:
        plain = word.replace("'", "").replace("’", "")
        term = "" if plain in ENGLISH_STOP_WORDS else _stem_word()(plain)
        if len(_terms) < 1_000_000:
            _terms[word] = term
    return term


def analyze(text: str) -> list[str]:
    """The index terms of `text`, in order (duplicates kept, as BM25 counts them)."""
    out: list[str] = []
    append = out.append
    terms = _terms
    for token in _TOKENS.findall(text.lower()):
        if token[0] > "\u303f" and _IS_CJK.match(token):
            for piece in _CJK_SPLIT.split(token):
                if len(piece) == 1:
                    append(piece)
                elif piece:
                    out.extend([piece[i : i + 2] for i in range(len(piece) - 1)])
        else:
            term = terms.get(token)
            if term is None:
                term = _term(token)
            if term:
                append(term)
    return out


MIN_PART_LETTERS = 3  # each part of a split compound ("scatter" + "plot")
MIN_SPLIT_LETTERS = 2 * MIN_PART_LETTERS + 1  # a shorter word is not split


def query_terms(text: str, known: Container[str]) -> list[str]:
    """`analyze(text)`, then the query's English compounds written the other way, where `known` (the index's
    terms) holds them: two adjacent words joined ("scatter plot", "scatter-plot" -> scatterplot, counted twice as
    it stands for two words; the first may be a capital letter, a name: "R script" -> rscript) and a word the index does not hold split into two known words ("scatterplot" ->
    scatter, plot: the most even split, parts of at least MIN_PART_LETTERS letters, no stop word). So a query
    finds a compound however the documents write it.
    """
    terms = analyze(text)
    tokens = [t for t in _TOKENS.findall(text) if t.isalpha() and t.isascii()]
    words = [t.lower() for t in tokens]
    extra: list[str] = []
    for (first, second), written in zip(zip(words, words[1:], strict=False), tokens, strict=False):
        if (len(first) >= 2 or written.isupper() and written != "I") and len(second) >= 2:  # R script -> Rscript
            joined = _term(first + second)
            if joined and joined in known:
                extra += [joined, joined]  # it stands for two words of the query
    for word in words:
        if len(word) >= MIN_SPLIT_LETTERS and _term(word) not in known:
            extra.extend(_split_compound(word, known))
    return terms + extra


def _split_compound(word: str, known: Container[str]) -> list[str]:
    """The terms of the most even split of `word` into two known, non-stop words ([] when there is none)."""
    best: list[str] = []
    best_shorter = 0
    for cut in range(MIN_PART_LETTERS, len(word) - MIN_PART_LETTERS + 1):
        shorter = min(cut, len(word) - cut)
        if shorter <= best_shorter:
            continue
        left, right = _term(word[:cut]), _term(word[cut:])
        if left and right and left in known and right in known:
            best, best_shorter = [left, right], shorter
    return best


_jieba_lock = threading.Lock()
_jieba_tokenizer: Any = None


def jieba_analyze(text: str) -> list[str]:
    """Like `analyze`, but Chinese runs are segmented into jieba words (search mode) instead of bigrams."""
    tokenizer = _jieba()
    out: list[str] = []
    for token in _TOKENS.findall(text.lower()):
        if token[0] > "\u303f" and _IS_CJK.match(token):
            out.extend(w for w in tokenizer.cut_for_search(token, HMM=True) if w not in CHINESE_STOP_CHARS)
        elif term := _term(token):
            out.append(term)
    return out


def _jieba() -> Any:
    """jieba's tokenizer, initialised once, its dictionary cache kept in the workspace (no network is used)."""
    global _jieba_tokenizer
    with _jieba_lock:
        if _jieba_tokenizer is None:
            import logging

            try:
                import jieba
            except ModuleNotFoundError as e:
                raise missing_dependency(e, "Chinese word segmentation (lang='zh')") from None

            logging.getLogger("jieba").setLevel(logging.WARNING)
            tokenizer: Any = jieba.Tokenizer()  # jieba is untyped (it declares tmp_dir as None)
            tokenizer.tmp_dir = str(workspace_dir("jieba"))
            tokenizer.initialize()
            _jieba_tokenizer = tokenizer
        return _jieba_tokenizer


def word_units(terms: Iterable[str]) -> set[str]:
    """Terms as units of coverage: a CJK term becomes its characters, any other stays whole."""
    out: set[str] = set()
    for term in terms:
        if _CJK_START.match(term):
            out.update(term)
        else:
            out.add(term)
    return out
