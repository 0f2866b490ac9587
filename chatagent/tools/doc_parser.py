"""The `doc_parser` tool: the text of one of the user's files, page by page, for agents that read whole files.

    bot = FnCallAgent(llm=cfg, function_list=[{'name': 'doc_parser', 'files': ['notes.docx']}])

Like `retrieval`, it reads only the files the user gave (see `chatagent.tools.retrieval`). The text is
cut to the `max_tokens` setting (default 8000). Settings: `files`, `max_tokens`, `passwords`, `store`.

Called directly by code, as Qwen-Agent's is, it parses the file or URL it is given and returns Qwen-Agent's Record
dict (`{'url', 'title', 'raw': [{'content', 'token', 'metadata'}]}`, see `chatagent.tools.doc_records`): the whole
document as one chunk when it fits `max_ref_token` (default 20000), else chunks of `parser_page_size` tokens.

    DocParser().call({'url': 'report.pdf'})['raw'][0]['content']
"""

from __future__ import annotations

from typing import Any

from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.doc_records import DEFAULT_MAX_REF_TOKEN, DEFAULT_PARSER_PAGE_SIZE, make_record
from chatagent.tools.simple_doc_parser import DocParserError, read_document
from chatagent.tools.user_files import allowed_files, choose_files, configured_file
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

    def call(self, params: str | JSONObject, **kwargs: Any) -> str | dict[str, Any]:
        args = self.parse_params(params)
        if "messages" not in kwargs:  # called by code: Qwen-Agent's Record of the file it names
            url = configured_file(args["url"], allowed_files(self.cfg.get("files"), None))
            return self.record(url, **kwargs)
        allowed = allowed_files(self.cfg.get("files"), kwargs.get("messages"))
        files = choose_files([args["url"]], allowed)
        if isinstance(files, str):
            return files
        try:
            doc = read_document(self.cfg, files[0])
        except DocParserError as e:
            return f"The file could not be read: {e.message}"
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

    def record(self, url: str, **kwargs: Any) -> dict[str, Any]:
        """Qwen-Agent's Record dict of `url`; `max_ref_token` and `parser_page_size` as keywords or settings."""
        max_ref_token = int(kwargs.get("max_ref_token", self.cfg.get("max_ref_token", DEFAULT_MAX_REF_TOKEN)))
        page_size = int(kwargs.get("parser_page_size", self.cfg.get("parser_page_size", DEFAULT_PARSER_PAGE_SIZE)))
        return make_record(read_document(self.cfg, url), url, max_ref_token, page_size).to_dict()
