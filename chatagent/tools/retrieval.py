"""The `retrieval` tool: search the user's files for passages, for agents that retrieve through tool calls.

    bot = FnCallAgent(llm=cfg, function_list=[{'name': 'retrieval', 'files': ['manual.pdf']}])

It reads only the files the user gave: those in the tool's `files` setting and the file items of the
user's messages. A file the model names that is not among them (another path, `../`, a URL of its own)
is refused with a message the model can read. Settings: `files`, `max_ref_token` (default 4000),
`passwords`, `store` (a DocStore).

Called directly by code with Qwen-Agent's arguments, it reads the files it is given and answers as Qwen-Agent's
does: a list of `{'url': file, 'text': [chunk, ...]}` within `max_ref_token` (default 20000 there), found by the
`rag_searchers` (default keyword and front-page search; see `chatagent.tools.search_tools`).

    Retrieval().call({'query': 'vault code', 'files': ['report.pdf']})
"""

from __future__ import annotations

from typing import Any

from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import TOOL_REGISTRY, BaseTool, register_tool
from chatagent.tools.doc_parser import DocParser
from chatagent.tools.doc_records import DEFAULT_MAX_REF_TOKEN as QWEN_MAX_REF_TOKEN
from chatagent.tools.doc_records import DEFAULT_PARSER_PAGE_SIZE
from chatagent.tools.search_tools import DEFAULT_RAG_SEARCHERS, HybridSearch
from chatagent.tools.user_files import allowed_files, choose_files, files_to_read, message_files, store_from_cfg

__all__ = ["Retrieval", "allowed_files", "choose_files", "files_to_read", "message_files", "store_from_cfg"]

DEFAULT_MAX_REF_TOKEN = 4000


@register_tool("retrieval")
class Retrieval(BaseTool):
    """Search the user's files; returns excerpts headed `[file, p. N]`."""

    description = (
        "Search the files the user gave for passages relevant to a query. Returns excerpts, each headed by "
        "its source as [file, p. N]; cite them that way."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in the words of the documents."},
            "files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Optional: names of the user's files to search (all of them when omitted).",
            },
        },
        "required": ["query"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str | list[dict[str, Any]]:
        args = self.parse_params(params)
        if "messages" not in kwargs:  # called by code, as Qwen-Agent's Memory and users do
            return self.search_files(args.get("files") or allowed_files(self.cfg.get("files"), None), args["query"])
        allowed = allowed_files(self.cfg.get("files"), kwargs.get("messages"))
        files = choose_files(args.get("files"), allowed)
        if isinstance(files, str):
            return files
        found = store_from_cfg(self.cfg).retrieve(
            files,
            args["query"],
            int(self.cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN)),
            passwords=self.cfg.get("passwords"),
        )
        parts = [found.as_text()] if found.chunks else ["No passage of the files matches this query."]
        if found.errors:
            parts.append("These files could not be read:\n" + "\n".join(f"- {e}" for e in found.errors))
        return "\n\n".join(parts)

    def search_files(self, files: list[str], query: str) -> list[dict[str, Any]]:
        """Qwen-Agent's answer: the chunks of `files` the `rag_searchers` find for `query`, per file."""
        max_ref_token = int(self.cfg.get("max_ref_token", QWEN_MAX_REF_TOKEN))
        page_size = int(self.cfg.get("parser_page_size", DEFAULT_PARSER_PAGE_SIZE))
        parser = DocParser({k: v for k, v in self.cfg.items() if k in ("store", "passwords")})
        records = [parser.record(f, max_ref_token=max_ref_token, parser_page_size=page_size) for f in files]
        if not records:
            return []
        names = list(self.cfg.get("rag_searchers") or DEFAULT_RAG_SEARCHERS)
        cfg = {"max_ref_token": max_ref_token, "rag_searchers": names}
        searcher = TOOL_REGISTRY[names[0]](cfg) if len(names) == 1 else HybridSearch(cfg)
        return searcher.call({"query": query}, docs=records)
