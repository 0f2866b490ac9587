"""`simple_doc_parser`: a document's whole text, or its pages in Qwen-Agent's structured form.

    SimpleDocParser().call({'url': 'report.pdf'})                          # the text, one paragraph a line
    SimpleDocParser({'structured_doc': True}).call({'url': 'report.pdf'})  # [{'page_num', 'content', ...}]

`url` is a local path or an http(s) URL (fetched under chatagent's public-address policy when a server asks).
Called by an agent, it reads only the user's files, as `doc_parser` does. Parsing is chatagent's
(`chatagent.rag`: PDF, DOCX, PPTX, XLSX, CSV/TSV, HTML, text), cached by content in the workspace. A file
that cannot be read raises DocParserError, as Qwen-Agent's does (an agent reports it to the model).
"""

from __future__ import annotations

from typing import Any

from chatagent.rag.document import Document, DocumentError
from chatagent.rag.parsers import display_name
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.doc_records import plain_text, structured_pages
from chatagent.tools.tool import CodedError
from chatagent.tools.user_files import files_to_read, store_from_cfg

__all__ = ["PARSER_SUPPORTED_FILE_TYPES", "DocParserError", "SimpleDocParser"]

PARSER_SUPPORTED_FILE_TYPES = ["pdf", "docx", "pptx", "txt", "md", "html", "csv", "tsv", "xlsx"]


class DocParserError(CodedError):
    """A document could not be parsed: `code` is why ('needs_password', 'no_text', 'broken', 'too_large',
    'unsupported'), `message` says it in words."""


@register_tool("simple_doc_parser")
class SimpleDocParser(BaseTool):
    """The text of one document (a path or URL); `structured_doc` for its pages and paragraphs."""

    description = f"Extract the content of a document. Supported types: {' / '.join(PARSER_SUPPORTED_FILE_TYPES)}"
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The file's local path or downloadable http(s) link."}},
        "required": ["url"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.structured_doc = bool(self.cfg.get("structured_doc", False))

    def call(self, params: str | JSONObject, **kwargs: Any) -> str | list[dict[str, Any]]:
        args = self.parse_params(params)
        files = files_to_read(self.cfg, [args["url"]], kwargs)
        if isinstance(files, str):
            return files
        pages = structured_pages(read_document(self.cfg, files[0]))
        return pages if self.structured_doc else plain_text(pages)


def read_document(cfg: dict[str, Any], url: str) -> Document:
    """The parsed Document of `url` from the tool's store (see `store_from_cfg`); DocParserError if unreadable."""
    passwords: dict[str, str] = cfg.get("passwords") or {}
    try:
        return store_from_cfg(cfg).document(url, password=passwords.get(url) or passwords.get(display_name(url)))
    except DocumentError as e:
        raise DocParserError(code=e.reason, message=str(e)) from None
