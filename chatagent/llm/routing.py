"""Where one model call goes: the response cache, prompt-based function calling (`chatagent.llm.fncall_prompt`),
or the backend's own reply (`BaseChatModel.backend_reply`), with `<think>` text parsed out when asked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from chatagent.schema import FUNCTION, Message

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel, Usage
    from chatagent.llm.settings import Settings
    from chatagent.schema.fragment import Fragment


def call_model(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> Iterator[list[Fragment]]:
    """The fragments of `model`'s reply: from the response cache when settings ask for one, else the model's."""
    if settings.cache or settings.cache_dir:
        from chatagent.llm.cache import lookup, recording, replay  # sqlite: with a response cache only

        store, key = lookup(model, msgs, funcs, cfg, settings)
        if store is not None:
            stored = store.get(key)
            if stored is not None:
                return replay(stored)
            return recording(store, key, _model_call(model, msgs, funcs, cfg, settings, usage, stream))
    return _model_call(model, msgs, funcs, cfg, settings, usage, stream)


def _model_call(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> Iterator[list[Fragment]]:
    from chatagent.llm import fncall_prompt  # prompt-based function calling: when used

    prompted, cfg = _route(model, msgs, funcs, cfg, settings, usage)
    if prompted:
        return fncall_prompt.chat(model, msgs, funcs or [], cfg, settings, usage, stream)
    native = model.backend_reply(msgs, funcs, cfg, settings, usage, stream)
    if funcs:  # a server that rejects tools: answered through the prompt
        native = fncall_prompt.falling_back(model, native, msgs, funcs, cfg, settings, usage, stream)
    if settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
        native = fncall_prompt.StreamParser(parse_calls=False).run(native)
    return native


def acall_model(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> AsyncIterator[list[Fragment]]:
    """`call_model` for asyncio."""
    if settings.cache or settings.cache_dir:
        from chatagent.llm.cache import arecording, lookup  # sqlite: with a response cache only

        store, key = lookup(model, msgs, funcs, cfg, settings)
        if store is not None:
            return arecording(store, key, lambda: _amodel_call(model, msgs, funcs, cfg, settings, usage, stream))
    return _amodel_call(model, msgs, funcs, cfg, settings, usage, stream)


def _amodel_call(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
    stream: bool,
) -> AsyncIterator[list[Fragment]]:
    """`_model_call` for asyncio: the fragments, as an async iterator (returned, not wrapped: one layer less per
    chunk)."""
    from chatagent.llm import fncall_prompt  # prompt-based function calling: when used

    prompted, cfg = _route(model, msgs, funcs, cfg, settings, usage)
    if prompted:
        return fncall_prompt.achat(model, msgs, funcs or [], cfg, settings, usage, stream)
    native = model.abackend_reply(msgs, funcs, cfg, settings, usage, stream)
    if funcs:  # a server that rejects tools: answered through the prompt
        native = fncall_prompt.afalling_back(model, native, msgs, funcs, cfg, settings, usage, stream)
    if settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
        return fncall_prompt.StreamParser(parse_calls=False).arun(native)
    return native


def _route(
    model: BaseChatModel,
    msgs: list[Message],
    funcs: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    settings: Settings,
    usage: Usage | None,
) -> tuple[bool, dict[str, Any]]:
    """(whether to call tools through a prompt, the backend's cfg) for one call, counted in `usage`."""
    if usage is not None:
        usage.calls += 1
    if settings.request_timeout is not None:  # the one framework setting a backend applies itself
        cfg = {**cfg, "request_timeout": settings.request_timeout}
    raw_api = settings.use_raw_api
    prompted = not model.native_tools or raw_api is False or (bool(settings.fncall_prompt_type) and not raw_api)
    if prompted and (funcs or _has_calls(msgs)):
        # without tools too: earlier calls and results must reach the model as the prompt's text
        settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
        return True, cfg
    return False, cfg


def _has_calls(msgs: list[Message]) -> bool:
    return any(m.role == FUNCTION or m.function_call is not None for m in msgs)
