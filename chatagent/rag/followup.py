"""What to search for a question asked in a conversation: the question itself, the question before it, or both.

    from chatagent.rag.followup import search_query
    query = search_query('And an example?', 'How do I read a CSV file?', file_index)   # the earlier question

A question that stands on its own ("What is a factor?") is searched as it is, however short. One that names
nothing of its own ("Can you show an example?", "Why?", "Tell me more") is searched as the question before it.
Between the two, a question that refers back ("How do I plot it?", "And for a data frame?") is searched both
ways, alone and with the question before it, and the joint search is kept when its best hit answers the
question itself nearly as well as the best hit of the question alone (JOINT_SHARE of its score): it then
holds what both are about.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from chatagent.rag.analysis import analyze

if TYPE_CHECKING:
    from chatagent.rag.file_index import FileIndex

__all__ = ["names_nothing", "refers_back", "search_query"]

JOINT_SHARE = 0.5
# Words that point back at something said before (English), and their Chinese counterparts.
_REFERS_BACK = re.compile(
    r"^\s*(and|but|so|or|also|then|what about|how about)\b"
    r"|\b(it|its|itself|they|them|their|this|that|these|those|he|him|his|she|her|there|such|same|above|"
    r"previous|earlier|former|latter|again|else|another|instead|one)\b"
    r"|[它这那此其该]|上面|上述|刚才|之前|呢\s*[?？]?\s*$",
    re.IGNORECASE,
)
# Words that ask for more of something without naming it, and their Chinese counterparts (as bigrams).
_REQUEST_WORDS = (
    "example examples show explain explanation tell more detail details elaborate give mean meaning clarify "
    "continue summary summarise summarize illustrate describe please thanks thank use work why"
)
_REQUEST_BIGRAMS = ("例子", "举例", "解释", "详细", "更多", "说明", "什么", "怎么", "一下", "谢谢", "继续", "总结")


@lru_cache(maxsize=1)
def _request_terms() -> frozenset[str]:
    return frozenset([*analyze(_REQUEST_WORDS), *_REQUEST_BIGRAMS])


def refers_back(question: str) -> bool:
    """Whether `question` points back at what was said before ("it", "those", "And ...", "这个", "...呢?")."""
    return _REFERS_BACK.search(question) is not None


def names_nothing(question: str) -> bool:
    """Whether `question` has no search term of its own beyond asking for more ("Can you show an example?")."""
    request = _request_terms()
    return all(term in request for term in analyze(question))


def search_query(question: str, before: str | None, index: FileIndex) -> str:
    """The text to search `index` for `question`, given what the question before it was searched as (see the
    module docstring); `before` is None for a conversation's first question."""
    if not before or before == question:
        return question
    if names_nothing(question):
        return before
    if not refers_back(question):
        return question
    joint = f"{before}\n{question}"
    alone_hits = index.search(question, top_k=1)
    joint_hits = index.search(joint, top_k=1)
    if not alone_hits or not joint_hits:
        return joint if joint_hits else question
    if joint_hits[0][0].id == alone_hits[0][0].id:
        return joint
    scores = {chunk.id: score for chunk, score in index.search(question, top_k=len(index.chunks))}
    return joint if scores.get(joint_hits[0][0].id, 0.0) >= JOINT_SHARE * alone_hits[0][1] else question
