"""Qwen-Agent's `qwen_agent.utils.utils` helpers that user code imports, with the same names, arguments and results.

A face for ported code (nothing of ours imports it). Two differ on purpose: `get_file_type` of an http(s) URL
decides by its name and, failing that, says 'html' without asking the server (Qwen-Agent sends a HEAD request;
chatagent makes no request the user did not ask for), and `save_url_to_local_work_dir` is not provided (fetching
goes through `chatagent.utils.url_fetch`, which refuses private addresses).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import sys
import traceback
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from chatagent.rag.document import DocumentError
from chatagent.rag.text import decode_text
from chatagent.schema import DEFAULT_SYSTEM_MESSAGE, SYSTEM, USER, Message
from chatagent.utils.jsonlenient import parse_json

logger = logging.getLogger("chatagent")

CHINESE_CHAR_RE = re.compile(r"[\u4e00-\u9fff]")
FileType = Literal["pdf", "docx", "pptx", "txt", "html", "csv", "tsv", "xlsx", "xls", "unk"]
_NAMED_TYPES = ("pdf", "docx", "pptx", "csv", "tsv", "xlsx", "xls")
_HTML_TAG = re.compile(r"<(p|span|div|li|html|script)[^>]*?")
_FENCED = re.compile(r"```[^\n]*\n(.+?)```", re.S)


def print_traceback(is_error: bool = True) -> None:
    """Log the exception being handled (its last three frames): as an error, or as a warning."""
    text = "".join(traceback.format_exception(*sys.exc_info(), limit=3))
    (logger.error if is_error else logger.warning)(text)


def hash_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def has_chinese_chars(data: Any) -> bool:
    """Whether the text of `data` (anything, as `str` shows it) holds a Chinese character."""
    return bool(CHINESE_CHAR_RE.search(f"{data}"))


def has_chinese_messages(
    messages: Sequence[Message | dict[str, Any]], check_roles: Iterable[str] = (SYSTEM, USER)
) -> bool:
    """Whether a message of one of `check_roles` holds a Chinese character."""
    roles = tuple(check_roles)
    return any(m["role"] in roles and has_chinese_chars(m["content"]) for m in messages)


def get_basename_from_url(path_or_url: str) -> str:
    """The file name of a path or URL, unquoted ('https://host/' gives the host)."""
    if re.match(r"^[A-Za-z]:\\", path_or_url):
        path_or_url = path_or_url.replace("\\", "/")
    name = urllib.parse.unquote(os.path.basename(urllib.parse.urlparse(path_or_url).path)).strip()
    if not name:
        parts = [p.strip() for p in path_or_url.split("/") if p.strip()]
        name = parts[-1] if parts else ""
    return name


def is_http_url(path_or_url: str) -> bool:
    return path_or_url.startswith(("https://", "http://"))


def is_image(path_or_url: str) -> bool:
    """Whether the name ends like a jpg, jpeg, png or webp image."""
    return get_basename_from_url(path_or_url).lower().endswith(("jpg", "jpeg", "png", "webp"))


def contains_html_tags(text: str) -> bool:
    return bool(_HTML_TAG.search(text))


def save_text_to_file(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def read_text_from_file(path: str) -> str:
    """The file's text, in its encoding (see `chatagent.rag.text.decode_text`; DocumentError for a binary file)."""
    with open(path, "rb") as f:
        return decode_text(f.read(), get_basename_from_url(path))


def get_file_type(path: str) -> FileType:
    """'pdf', 'docx', 'pptx', 'csv', 'tsv', 'xlsx', 'xls' by the name; otherwise a URL is 'html' and a local file
    'html' or 'txt' by whether it holds HTML tags ('unk' when it cannot be read)."""
    suffix = get_basename_from_url(path).split(".")[-1].lower()
    if suffix in _NAMED_TYPES:
        return suffix  # pyright: ignore[reportReturnType] -- one of _NAMED_TYPES
    if is_http_url(path):
        return "html"
    try:
        text = read_text_from_file(path)
    except (OSError, DocumentError):
        print_traceback()
        return "unk"
    return "html" if contains_html_tags(text) else "txt"


def extract_urls(text: str) -> list[str]:
    return re.findall(r"https?://\S+", text)


def extract_markdown_urls(md_text: str) -> list[str]:
    """The targets of the Markdown links and images in `md_text`."""
    return re.findall(r"!?\[[^\]]*\]\(([^\)]+)\)", md_text)


def extract_code(text: str) -> str:
    """The code a model wrote: the first fenced block, else the 'code' of a JSON object, else the text itself."""
    fenced = _FENCED.search(text)
    if fenced:
        return fenced.group(1)
    try:
        value = parse_json(text)
    except ValueError:
        return text
    code = value.get("code") if isinstance(value, dict) else None
    return code if isinstance(code, str) else text


def json_loads(text: str) -> Any:
    """JSON, or json5 when it is not strict JSON; a ```-fenced text is unwrapped first. Raises the JSON error."""
    text = text.strip("\n")
    if text.startswith("```") and text.endswith("\n```"):
        text = "\n".join(text.split("\n")[1:-1])
    try:
        return json.loads(text)
    except json.JSONDecodeError as strict:
        try:
            return parse_json(text)
        except ValueError:
            raise strict from None


class PydanticJSONEncoder(json.JSONEncoder):
    """JSON of messages and pydantic models too (what `model_dump()` gives)."""

    def default(self, o: Any) -> Any:
        dump = getattr(o, "model_dump", None)
        return dump() if callable(dump) else super().default(o)


def json_dumps_pretty(obj: Any, ensure_ascii: bool = False, indent: int | None = 2, **kwargs: Any) -> str:
    return json.dumps(obj, ensure_ascii=ensure_ascii, indent=indent, cls=PydanticJSONEncoder, **kwargs)


def json_dumps_compact(obj: Any, ensure_ascii: bool = False, indent: int | None = None, **kwargs: Any) -> str:
    return json.dumps(obj, ensure_ascii=ensure_ascii, indent=indent, cls=PydanticJSONEncoder, **kwargs)


def _items(message: Message | dict[str, Any]) -> list[Any]:
    content = message["content"]
    return content if isinstance(content, list) else []


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def extract_files_from_messages(messages: Sequence[Message | dict[str, Any]], include_images: bool) -> list[str]:
    """The files (and, with `include_images`, images) the messages attach, each once, in order."""
    keys = ("file", "image") if include_images else ("file",)
    found: list[str] = []
    for m in messages:
        for item in _items(m):
            for key in keys:
                value = _field(item, key)
                if value and value not in found:
                    found.append(value)
    return found


def extract_images_from_messages(messages: Sequence[Message | dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for m in messages:
        for item in _items(m):
            value = _field(item, "image")
            if value and value not in found:
                found.append(value)
    return found


def merge_generate_cfgs(base_generate_cfg: dict[str, Any] | None, new_generate_cfg: dict[str, Any] | None) -> dict:
    """A deep copy of `base_generate_cfg` with `new_generate_cfg` over it; `stop` lists are joined, not replaced."""
    cfg: dict[str, Any] = copy.deepcopy(base_generate_cfg or {})
    for key, value in (new_generate_cfg or {}).items():
        if key == "stop":
            stop = list(cfg.get("stop", []))
            cfg["stop"] = stop + [s for s in value if s not in stop]
        else:
            cfg[key] = value
    return cfg


def get_last_usr_msg_idx(messages: Sequence[Message | dict[str, Any]]) -> int:
    """The index of the last user message; ValueError when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == USER:
            return i
    raise ValueError("no user message in the messages")


def rm_default_system(messages: list[Message]) -> list[Message]:
    """The messages without a first system message that says only DEFAULT_SYSTEM_MESSAGE."""
    if len(messages) > 1 and messages[0].role == SYSTEM:
        content = messages[0].content
        text = content if isinstance(content, str) else content[0].text if len(content) == 1 else None
        if text is not None and text.strip() == DEFAULT_SYSTEM_MESSAGE:
            return messages[1:]
    return messages


__all__ = [
    "CHINESE_CHAR_RE",
    "PydanticJSONEncoder",
    "contains_html_tags",
    "extract_code",
    "extract_files_from_messages",
    "extract_images_from_messages",
    "extract_markdown_urls",
    "extract_urls",
    "get_basename_from_url",
    "get_file_type",
    "get_last_usr_msg_idx",
    "has_chinese_chars",
    "has_chinese_messages",
    "hash_sha256",
    "is_http_url",
    "is_image",
    "json_dumps_compact",
    "json_dumps_pretty",
    "json_loads",
    "merge_generate_cfgs",
    "print_traceback",
    "read_text_from_file",
    "rm_default_system",
    "save_text_to_file",
]
