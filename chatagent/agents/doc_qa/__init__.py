"""Question answering over documents: BasicDocQA (excerpts, one answer) and ParallelDocQA (every part read)."""

from chatagent.agents.doc_qa.basic_doc_qa import BasicDocQA, DocQAAgent
from chatagent.agents.doc_qa.parallel_doc_qa import ParallelDocQA

__all__ = ["BasicDocQA", "DocQAAgent", "ParallelDocQA"]
