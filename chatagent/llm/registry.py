"""The model registry: `get_chat_model(cfg)` builds the backend a config names (`model_type`, or guessed from
`model_server` and the environment); `register_llm` (defined in `chatagent.llm.base`, as in Qwen-Agent) adds a
backend to `LLM_REGISTRY`. Backends are imported on first use."""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any, cast

from chatagent.llm.base import LLM_REGISTRY, BaseChatModel
from chatagent.llm.base import register_llm as register_llm  # where it was

logger = logging.getLogger("chatagent.llm")

# Qwen-Agent's model_type names: (ours, config defaults they imply)
MODEL_TYPE_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen_dashscope": ("dashscope", {}),
    "qwenvl_dashscope": ("dashscope", {"multimodal": True}),
    "qwenaudio_dashscope": ("dashscope", {"multimodal": True}),
    "qwenvlo_dashscope": ("dashscope", {"multimodal": True}),
    "qwenvl_oai": ("oai", {"multimodal": True}),
    "qwenaudio_oai": ("oai", {"multimodal": True}),
    "qwenomni_oai": ("oai", {"multimodal": True}),
}
UNSUPPORTED_MODEL_TYPES = {
    "transformers": "Hugging Face transformers in-process",
    "openvino": "OpenVINO in-process",
}
DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
# `model_server` names that are not URLs: name -> the model_type it means
SERVER_NAMES = {
    "openai": "oai", "dashscope": "dashscope", "local": "local", "anthropic": "anthropic", "gemini": "gemini",
    "vertex": "gemini", "bedrock": "bedrock",
}  # fmt: skip
# model_type -> the `api`s it speaks ("module:Class" of each but the default)
APIS = {"oai": {"chat": None, "responses": "chatagent.llm.openai.responses:OpenAIResponsesModel"}}


def _llm_class(model_type: str) -> type[BaseChatModel]:
    entry = LLM_REGISTRY.get(model_type)
    if entry is None:
        if model_type in UNSUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type {model_type!r} ({UNSUPPORTED_MODEL_TYPES[model_type]}) is not supported: serve the "
                "model with an OpenAI-compatible server (vLLM, SGLang, Ollama) and give its URL as model_server, "
                "or use a GGUF file with model_type 'local'"
            )
        raise ValueError(f"unknown model_type {model_type!r}; registered: {', '.join(sorted(LLM_REGISTRY))}")
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        entry = getattr(importlib.import_module(module), name)
        LLM_REGISTRY[model_type] = entry
    return entry


def default_llm_config() -> dict[str, Any]:
    """The model to use when an agent gets none: DashScope, then an OpenAI-compatible server, then local.

    `DASHSCOPE_API_KEY` set gives DashScope's qwen-plus; `OPENAI_API_KEY` (with `OPENAI_BASE_URL` and
    `OPENAI_MODEL`) gives that server; otherwise the embedded local model.
    """
    if os.environ.get("DASHSCOPE_API_KEY"):
        return {"model_type": "dashscope", "model": os.environ.get("DASHSCOPE_MODEL", "qwen-plus")}
    if os.environ.get("OPENAI_API_KEY"):
        cfg: dict[str, Any] = {"model_type": "oai", "model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini")}
        if os.environ.get("OPENAI_BASE_URL"):
            cfg["model_server"] = os.environ["OPENAI_BASE_URL"]
        return cfg
    logger.warning(
        "no model configured: using the embedded local model (small and weak). "
        "Set DASHSCOPE_API_KEY, or OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL, to use a real one."
    )
    return {"model_type": "local"}


def get_chat_model(
    cfg: dict[str, Any] | str | BaseChatModel | list[Any] | tuple[Any, ...] | None = None,
) -> BaseChatModel:
    """A model from a config dict (or the instance itself; a string is a model name); None picks
    `default_llm_config()`; a list of them is a `chatagent.llm.fallback.FallbackModel` (each asked in turn when the
    one before fails). Qwen-Agent's model_type names are accepted (see MODEL_TYPE_ALIASES)."""
    if isinstance(cfg, BaseChatModel):
        return cfg
    if isinstance(cfg, (list, tuple)):
        return _llm_class("fallback")({"models": list(cast("list[Any]", cfg))})
    if cfg is None:
        cfg = default_llm_config()
    if isinstance(cfg, str):
        cfg = {"model": cfg}
    if not isinstance(cast(object, cfg), dict):  # callers outside typed code pass anything
        raise TypeError(f"llm must be a config dict or a BaseChatModel, got {type(cfg).__name__}")
    cfg = dict(cfg)
    model_type = cfg.get("model_type")
    if model_type in MODEL_TYPE_ALIASES:
        model_type, implied = MODEL_TYPE_ALIASES[model_type]
        cfg = {**implied, **cfg}
    if model_type == "oai" and str(cfg.get("model_server") or "").strip().lower() == "dashscope":
        cfg["model_server"] = DASHSCOPE_COMPATIBLE_URL  # DashScope's OpenAI-compatible mode, as Qwen-Agent reads it
    if model_type is None and cfg.get("azure_endpoint"):
        model_type = "azure"
    server = str(cfg.get("model_server") or "").strip()
    named = SERVER_NAMES.get(server.lower()) if server else None
    if server and named is None and not server.startswith(("http://", "https://")):
        raise ValueError(
            f"model_server {server!r} is neither a URL (http:// or https://) nor a known server: "
            f"{', '.join(sorted(SERVER_NAMES))}"
        )
    if model_type is None:
        if named is not None:
            model_type = named
        elif str(cfg.get("model", "")).endswith(".gguf"):
            model_type = "local"
        elif not server and os.environ.get("DASHSCOPE_API_KEY") and str(cfg.get("model", "")).startswith("qwen"):
            model_type = "dashscope"
        else:
            model_type = "oai"
    elif named is not None and named != model_type and model_type in SERVER_NAMES.values():
        raise ValueError(f"model_server {server!r} is a {named!r} server, but model_type is {model_type!r}")
    cfg["model_type"] = model_type
    api = cfg.get("api")
    if api is not None:
        apis = APIS.get(model_type, {})
        if api not in apis:
            known = f"one of {', '.join(map(repr, apis))}" if apis else "not a setting of this model_type"
            raise ValueError(f"api {api!r} for model_type {model_type!r}: {known}")
        entry = apis[api]
        if entry is not None:
            module, _, name = entry.partition(":")
            return getattr(importlib.import_module(module), name)(cfg)
    return _llm_class(model_type)(cfg)
