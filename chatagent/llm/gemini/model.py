"""GeminiModel: Google's Gemini models through the Generative Language API, or Vertex AI given as the base URL,
spoken natively over httpx (no SDK on the path).

    llm = get_chat_model({'model_type': 'gemini', 'model': 'gemini-2.5-flash'})      # key from GEMINI_API_KEY
    vertex = get_chat_model({'model_type': 'gemini', 'model': 'gemini-2.5-pro',
                             'model_server': 'https://us-central1-aiplatform.googleapis.com/v1/projects/P/'
                                             'locations/us-central1/publishers/google',
                             'api_key': access_token})                                # e.g. gcloud auth print-access-token

`model_server`: the API's base URL (default `GOOGLE_GEMINI_BASE_URL`, else https://generativelanguage.googleapis.com;
`/v1beta` added unless the
URL names its version); a URL with `/publishers/google` in it is Vertex AI, which takes an OAuth access token as
`api_key` (a Bearer token) instead of an API key. `api_key`: else `GEMINI_API_KEY`, else `GOOGLE_API_KEY`.
generate_cfg: the settings every backend takes (`reasoning_effort` as `thinkingConfig.thinkingBudget`),
`cached_content` (the name of a context cache made with the API, `cachedContents/...`), any other key into the body.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from chatagent.llm.gemini.reply import GeminiReader, whole_response
from chatagent.llm.gemini.request import request_body
from chatagent.llm.http_backend import HTTPCall, HTTPModel, Prompt, StreamReader, json_body, server_url
from chatagent.llm.registry import register_llm
from chatagent.llm.request import Usage
from chatagent.llm.request_options import request_options
from chatagent.llm.settings import ToolChoice
from chatagent.schema import Message
from chatagent.utils.keys import clean_api_key

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"


@register_llm("gemini")
class GeminiModel(HTTPModel):
    """A Gemini model (see the module docstring for the config)."""

    provider = "Gemini"
    key_hint = "api_key / GEMINI_API_KEY"

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        default = os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = server_url(self.cfg.get("model_server"), ("gemini", "google", "vertex"), default)
        self.vertex = "/publishers/google" in self.base_url
        given = self.cfg.get("api_key") or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        self.api_key = clean_api_key(given)
        versioned = self.vertex or self.base_url.rsplit("/", 1)[-1] in ("v1", "v1beta", "v1alpha")
        self._models = self.base_url + ("/models/" if versioned else "/v1beta/models/") + quote(self.model, safe="")

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        opts = request_options(cfg, tool_choice)
        body = request_body(messages, functions, opts, cfg)
        headers = {"Content-Type": "application/json", **opts.extra_headers}
        if self.api_key:
            if self.vertex:
                headers["Authorization"] = f"Bearer {self.api_key}"
            else:
                headers["x-goog-api-key"] = self.api_key
        url = self._models + (":streamGenerateContent?alt=sse" if stream else ":generateContent")
        native = opts.schema() is not None
        return HTTPCall(url, headers, json_body(body), opts.timeout, stream, bool(functions), native)

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        return GeminiReader(self, prompt, call.context)

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        return whole_response(self, body, usage, prompt, call.context)


__all__ = ["GeminiModel"]
