"""Azure OpenAI: a deployment behind `{endpoint}/openai/deployments/{model}`, with an `api-version` and an
`api-key` header.

    llm = get_chat_model({'model_type': 'azure', 'model': 'my-gpt4o-deployment',
                          'azure_endpoint': 'https://my-resource.openai.azure.com', 'api_version': '2024-06-01'})

`model` is the deployment's name. The endpoint may also be given as `model_server` / `base_url` / `api_base`
(as Qwen-Agent reads it) or by AZURE_OPENAI_ENDPOINT; the key as `api_key`, AZURE_OPENAI_API_KEY or
OPENAI_API_KEY; `api_version` defaults to OPENAI_API_VERSION, else 2024-06-01. Everything else is as for
any OpenAI-compatible server (see `chatagent.llm.openai.chat`). A config with `azure_endpoint` and no
`model_type` is Azure too.
"""

from __future__ import annotations

import os
from typing import Any

from chatagent.llm.openai.chat import OpenAICompatModel
from chatagent.llm.registry import register_llm

DEFAULT_API_VERSION = "2024-06-01"


@register_llm("azure")
class AzureModel(OpenAICompatModel):
    """A deployment on Azure OpenAI (see the module docstring)."""

    cfg_keys = frozenset({"azure_endpoint", "api_version"})

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        endpoint = str(
            cfg.get("azure_endpoint") or self.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT") or ""
        ).strip()
        if not endpoint:
            raise ValueError("Azure OpenAI needs the endpoint: azure_endpoint='https://<resource>.openai.azure.com'")
        if not self.model:
            raise ValueError("Azure OpenAI needs the deployment's name as 'model'")
        self.base_url = f"{endpoint.rstrip('/')}/openai/deployments/{self.model}"
        self.api_version: str = cfg.get("api_version") or os.environ.get("OPENAI_API_VERSION") or DEFAULT_API_VERSION
        self.api_key = cfg.get("api_key") or os.environ.get("AZURE_OPENAI_API_KEY") or self.api_key

        self.url = f"{self.base_url}/chat/completions"

    def _http_options(self) -> dict[str, Any]:
        return {"params": {"api-version": self.api_version}, "headers": {"api-key": self.api_key}}


__all__ = ["AzureModel"]
