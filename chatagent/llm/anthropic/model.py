"""AnthropicModel: Claude through Anthropic's own Messages API, spoken natively over httpx (no SDK on the path).

    llm = get_chat_model({'model_type': 'anthropic', 'model': 'claude-sonnet-4-5'})   # key from ANTHROPIC_API_KEY

`model_server`: the base URL (default `ANTHROPIC_BASE_URL`, else https://api.anthropic.com; a gateway or a
loopback server can stand in); `api_key` (else `ANTHROPIC_API_KEY`). generate_cfg: the settings every backend
takes (`max_tokens`, `temperature`, `top_p`, `top_k`, `stop`, `reasoning_effort` as a thinking budget, ...),
`prompt_cache` (default True: see `chatagent.llm.anthropic.request`), and any other key into the body as it is.
"""

from __future__ import annotations

import os
from typing import Any

from chatagent.llm.anthropic.reply import AnthropicReader, whole_message
from chatagent.llm.anthropic.request import API_VERSION, request_body
from chatagent.llm.http_backend import HTTPCall, HTTPModel, Prompt, StreamReader, json_body, server_url
from chatagent.llm.registry import register_llm
from chatagent.llm.request import Usage
from chatagent.llm.request_options import request_options
from chatagent.llm.settings import ToolChoice
from chatagent.schema import Message
from chatagent.utils.keys import clean_api_key

DEFAULT_BASE_URL = "https://api.anthropic.com"


@register_llm("anthropic")
class AnthropicModel(HTTPModel):
    """A Claude model behind the Messages API. See the module docstring for the config."""

    provider = "Anthropic"
    key_hint = "api_key / ANTHROPIC_API_KEY"
    window_from_server = False

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        default = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = server_url(self.cfg.get("model_server"), ("anthropic",), default)
        self.api_key = clean_api_key(self.cfg.get("api_key") or os.environ.get("ANTHROPIC_API_KEY"))

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        opts = request_options(cfg, tool_choice)
        prompt_cache = cfg.get("prompt_cache", True) is not False
        body, response_tool = request_body(
            self.model, messages, functions, opts, stream=stream, prompt_cache=prompt_cache
        )
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION, **opts.extra_headers}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        url = self.base_url + ("/messages" if self.base_url.endswith("/v1") else "/v1/messages")
        return HTTPCall(url, headers, json_body(body), opts.timeout, stream, bool(functions), response_tool)

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        return AnthropicReader(self, prompt, call.context)

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        return whole_message(self, body, usage, prompt, call.context)


__all__ = ["AnthropicModel"]
