"""Retrieval-augmented generation: parse files, chunk them, index them once, retrieve the best chunks.

    from chatagent.rag import parse_file, Index, retrieve
    doc = parse_file('manual.pdf')                 # Document: .pages[i].text / .number
    hits = retrieve(['manual.pdf'], 'How do I install packages?', max_tokens=4000)

Names are imported on first use, so importing this package loads no parser or tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatagent.utils.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Document": "chatagent.rag.parsers",
    "DocumentError": "chatagent.rag.parsers",
    "Page": "chatagent.rag.parsers",
    "parse_file": "chatagent.rag.parsers",
    "parse_bytes": "chatagent.rag.parsers",
    "SUPPORTED_EXTENSIONS": "chatagent.rag.parsers",
    "Chunk": "chatagent.rag.chunking",
    "chunk_document": "chatagent.rag.chunking",
    "Index": "chatagent.rag.index",
    "analyze": "chatagent.rag.analysis",
    "DocStore": "chatagent.rag.store",
    "FileIndex": "chatagent.rag.file_index",
    "Retrieved": "chatagent.rag.file_index",
    "Progress": "chatagent.rag.progress",
    "default_store": "chatagent.rag.store",
    "retrieve": "chatagent.rag.store",
    "format_chunks": "chatagent.rag.file_index",
    "workspace_root": "chatagent.utils.workspace",
}

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Chunk",
    "DocStore",
    "Document",
    "DocumentError",
    "FileIndex",
    "Index",
    "Page",
    "Progress",
    "Retrieved",
    "analyze",
    "chunk_document",
    "default_store",
    "format_chunks",
    "parse_bytes",
    "parse_file",
    "retrieve",
    "workspace_root",
]

if TYPE_CHECKING:
    from chatagent.rag.analysis import analyze
    from chatagent.rag.chunking import Chunk, chunk_document
    from chatagent.rag.file_index import FileIndex, Retrieved, format_chunks
    from chatagent.rag.index import Index
    from chatagent.rag.parsers import SUPPORTED_EXTENSIONS, Document, DocumentError, Page, parse_bytes, parse_file
    from chatagent.rag.progress import Progress
    from chatagent.rag.store import DocStore, default_store, retrieve
    from chatagent.utils.workspace import workspace_root

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
