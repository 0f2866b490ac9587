"""Qwen-Agent's web tools: `web_extractor` (a page's text), `web_search` (Serper) and `image_search` (SerpApi).

    WebExtractor().call({'url': 'https://example.com/post'})       # the page's text
    WebSearch().call({'query': 'Qwen3 release'})                   # needs SERPER_API_KEY
    ImageSearch().call({'img_idx': 0}, messages=messages)         # needs SERPAPI_IMAGE_SEARCH_KEY

`web_extractor` reads http(s) URLs only (never a local path), through chatagent's fetcher: bounded in size and
time, and under `chatagent.utils.url_fetch.public_urls_only` (what `chatagent serve` runs requests in) never this
machine's own network, as for attachments. The search tools call the services their keys are for (the `api_key`
setting, else the environment variable; `url` overrides the service's address); without a key they raise a
ValueError naming the variable to set.
"""

from __future__ import annotations

import os
from typing import Any, cast

from chatagent.schema import ContentItem, Message, to_messages
from chatagent.tools.arguments import JSONObject
from chatagent.tools.base import BaseTool, register_tool
from chatagent.tools.doc_records import plain_text, structured_pages
from chatagent.tools.simple_doc_parser import read_document

__all__ = ["ImageSearch", "WebExtractor", "WebSearch", "message_images", "service_json"]

SERPER_URL = "https://google.serper.dev/search"
SERPAPI_URL = "https://serpapi.com/search.json"
SERVICE_TIMEOUT = 30.0


@register_tool("web_extractor")
class WebExtractor(BaseTool):
    """The text of one web page (or document) at an http(s) URL."""

    description = "Get the content of one web page."
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The web page's URL."}},
        "required": ["url"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        url = str(self.parse_params(params)["url"])
        if not url.lower().startswith(("http://", "https://")):
            return f"Error: web_extractor reads http(s) URLs only, not {url[:80]!r}."
        return plain_text(structured_pages(read_document(self.cfg, url)))


@register_tool("web_search")
class WebSearch(BaseTool):
    """Search the internet with Serper (google.serper.dev)."""

    description = "Search for information from the internet."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def call(self, params: str | JSONObject, **kwargs: Any) -> str:
        query = str(self.parse_params(params)["query"])
        return self._format_results(self.search(query))

    def search(self, query: str) -> list[dict[str, Any]]:
        """Serper's organic results for `query`."""
        key = _key(self.cfg, "SERPER_API_KEY", "https://serper.dev")
        url = self.cfg.get("url") or os.environ.get("SERPER_URL") or SERPER_URL
        data = service_json("POST", url, json={"q": query}, headers={"X-API-KEY": key})
        return list(data.get("organic") or [])

    @staticmethod
    def _format_results(results: list[dict[str, Any]]) -> str:
        found = "\n\n".join(
            f'[{i}]"{doc.get("title", "")}\n{doc.get("snippet", "")}"{doc.get("date", "")}'
            for i, doc in enumerate(results, 1)
        )
        return f"```\n{found}\n```"


@register_tool("image_search")
class ImageSearch(BaseTool):
    """Search the web for images like one of the conversation's (SerpApi's reverse image search)."""

    description = (
        "Image search engine: give the index of an image of the conversation, get similar images and what they are."
    )
    parameters = {
        "type": "object",
        "properties": {"img_idx": {"type": "number", "description": "The index of the image (starting from 0)"}},
        "required": ["img_idx"],
    }

    def call(self, params: str | JSONObject, **kwargs: Any) -> list[ContentItem] | str:
        index = int(self.parse_params(params)["img_idx"])
        images = message_images(kwargs.get("messages") or [])
        if not images:
            return "Error: no images found in the messages."
        image = images[min(max(index, 0), len(images) - 1)]
        if not image.lower().startswith(("http://", "https://")):
            return "Error: image_search can only search for an image at an http(s) URL."
        key = _key(self.cfg, "SERPAPI_IMAGE_SEARCH_KEY", "https://serpapi.com")
        query = {"engine": "google_reverse_image", "image_url": image, "api_key": key, "hl": "zh-CN", "gl": "cn"}
        data = service_json("GET", self.cfg.get("url") or SERPAPI_URL, params=query)
        content: list[ContentItem] = []
        seen: set[str] = set()
        items: list[Any] = [*(data.get("image_results") or []), *(data.get("inline_images") or [])]
        for item in items:
            found = item.get("original") or item.get("thumbnail")
            if not found or found in seen:
                continue
            seen.add(found)
            text = f'[{len(seen)}] "{found}" {item.get("title", "")}\n{item.get("snippet", "")}'.strip("\n")
            content += [ContentItem(text=text), ContentItem(image=found)]
        return content


def message_images(messages: list[Any]) -> list[str]:
    """The image items of all the messages (Messages or dicts), in order, without repeats."""
    msgs = [m for m in messages if isinstance(m, Message)]
    if len(msgs) < len(messages):
        msgs = to_messages(messages)
    found = [item.image for m in msgs if not isinstance(m.content, str) for item in m.content if item.image]
    return list(dict.fromkeys(found))


def service_json(method: str, url: str, **request: Any) -> dict[str, Any]:
    """A JSON object from a web service the user configured; RuntimeError with the status when it fails."""
    import httpx

    try:
        response = httpx.request(method, url, timeout=SERVICE_TIMEOUT, **request)
    except httpx.HTTPError as e:
        raise RuntimeError(f"{_host(url)} could not be reached: {type(e).__name__}") from None
    if response.status_code >= 400:
        raise RuntimeError(f"{_host(url)} answered HTTP {response.status_code}")
    try:
        data: Any = response.json()
    except ValueError:
        raise RuntimeError(f"{_host(url)} answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise RuntimeError(f"{_host(url)} answered JSON that is not an object")
    return cast("dict[str, Any]", data)


def _key(cfg: dict[str, Any], variable: str, where: str) -> str:
    key = cfg.get("api_key") or os.environ.get(variable)
    if not key:
        raise ValueError(f"{variable} is not set: get a key at {where} and set it (export {variable}=...) "
                         "or give it in the tool's 'api_key' setting")  # fmt: skip
    return str(key)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or "the service"
