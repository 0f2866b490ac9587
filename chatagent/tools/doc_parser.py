"""The `doc_parser` tool: the text of one of the user's files, page by page, for agents that read whole files.

    bot = FnCallAgent(llm=cfg, function_list=[{'name': 'doc_parser', 'files': ['notes.docx']}])

Like `retrieval`, it reads only the files the user gave (see `chatagent.tools.retrieval`). The text is
cut to the `max_tokens` setting (default 8000). Settings: `files`, `max_tokens`, `passwords`, `store`.
"""

from __future__ import annotations

from typing import Any

from chatagent.rag.parsers import DocumentError, display_name
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.retrieval import allowed_files, choose_files, store_from_cfg
from chatagent.utils.tokens import count_tokens, truncate_tokens

__all__ = ["DocParser"]


@register_tool("doc_parser")
class DocParser(BaseTool):
    """The text of one of the user's files, each page headed `[file, p. N]`."""

    description = "Read one of the files the user gave: its text, each page headed by [file, p. N]."
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The file's name (or URL) as the user gave it."}},
        "required": ["url"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        args = self.parse_params(params)
        allowed = allowed_files(self.cfg.get("files"), kwargs.get("messages"))
        files = choose_files([args["url"]], allowed)
        if isinstance(files, str):
            return files
        file = files[0]
        passwords: dict[str, str] = self.cfg.get("passwords") or {}
        password = passwords.get(file) or passwords.get(display_name(file))  # by path or by name, like retrieval
        try:
            doc = store_from_cfg(self.cfg).document(file, password=password)
        except DocumentError as e:
            return f"The file could not be read: {e}"
        budget = int(self.cfg.get("max_tokens", 8000))
        parts: list[str] = []
        used = 0
        for page in doc.pages:
            block = f"[{doc.source}, p. {page.number}]\n{page.text}"
            n = count_tokens(block)
            if used + n > budget:
                parts.append(truncate_tokens(block, max(budget - used, 0), marker=" ...[the rest is cut]"))
                break
            parts.append(block)
            used += n
        return "\n\n".join(parts)
