"""`extract_doc_vocabulary`: the words of documents, most characteristic first (TF-IDF), as Qwen-Agent's tool gives.

    ExtractDocVocabulary().call({'files': ['report.pdf', 'notes.docx']})   # 'vault, treasur, committe, ...'

Words are chatagent's search terms (`chatagent.rag.analysis`: English stemmed without stop words, Chinese in
character pairs); a word scores its smoothed TF-IDF weight in each document (each document's weights of unit
length), summed over the documents. Called by an agent, it reads only the user's files.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from chatagent.rag.analysis import analyze
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.doc_records import plain_text, structured_pages
from chatagent.tools.simple_doc_parser import read_document
from chatagent.tools.user_files import files_to_read

__all__ = ["ExtractDocVocabulary", "vocabulary"]


@register_tool("extract_doc_vocabulary")
class ExtractDocVocabulary(BaseTool):
    """The vocabulary of documents, comma-separated, most characteristic word first."""

    description = "Extract the vocabulary of documents."
    parameters = {
        "type": "object",
        "properties": {
            "files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The files: local paths or downloadable http(s) links.",
            }
        },
        "required": ["files"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        files = files_to_read(self.cfg, self.parse_params(params)["files"], kwargs)
        if isinstance(files, str):
            return files
        texts = [plain_text(structured_pages(read_document(self.cfg, f))) for f in files]
        return ", ".join(vocabulary(texts))


def vocabulary(texts: list[str]) -> list[str]:
    """The terms of `texts`, by summed TF-IDF weight (smoothed idf, unit-length documents), best first."""
    counts = [Counter(analyze(t)) for t in texts]
    n = len(counts)
    df = Counter(term for c in counts for term in c)
    scores: dict[str, float] = {}
    for c in counts:
        weights = {t: k * (math.log((1 + n) / (1 + df[t])) + 1) for t, k in c.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        for t, w in weights.items():
            scores[t] = scores.get(t, 0.0) + w / norm
    return [t for t, _ in sorted(scores.items(), key=lambda x: (-x[1], x[0]))]
