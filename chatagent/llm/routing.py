"""Where one model call goes: the response cache, prompt-based function calling (`chatagent.llm.fncall_prompt`),
or the backend's own reply (`Backend.backend_reply`), with calls a server left in the text recovered
(`chatagent.llm.recovered_calls`) and `<think>` text parsed out when asked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from chatagent.llm import fncall_prompt
from chatagent.llm.prices import PricedUsage, checked_price, price_of
from chatagent.llm.recovered_calls import arecover_calls, recover_calls, recovers_calls
from chatagent.llm.request import Backend, ModelRequest
from chatagent.schema import FUNCTION, Message
from chatagent.schema.fragment import Fragment


def call_model(backend: Backend, request: ModelRequest) -> Iterator[list[Fragment]]:
    """The fragments of the reply to `request`: from the response cache when its settings ask for one, else the
    backend's."""
    settings = request.settings
    if settings.cache or settings.cache_dir:
        from chatagent.llm.cache import lookup, recording, replay  # sqlite: with a response cache only

        store, key = lookup(backend, request.messages, request.functions, request.cfg, settings)
        if store is not None:
            stored = store.get(key)
            if stored is not None:
                return replay(stored)
            return recording(store, key, _model_call(backend, request))
    return _model_call(backend, request)


def _model_call(backend: Backend, request: ModelRequest) -> Iterator[list[Fragment]]:
    prompted, request = _route(backend, request)
    if prompted:
        return fncall_prompt.chat(backend, request)
    native = backend.backend_reply(request)
    if request.functions:  # a server that rejects tools: answered through the prompt
        native = fncall_prompt.falling_back(backend, native, request)
        if recovers_calls(backend, request):
            native = recover_calls(native, request, backend.model)
    if request.settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
        native = fncall_prompt.StreamParser(parse_calls=False).run(native)
    return native


def acall_model(backend: Backend, request: ModelRequest) -> AsyncIterator[list[Fragment]]:
    """`call_model` for asyncio."""
    settings = request.settings
    if settings.cache or settings.cache_dir:
        from chatagent.llm.cache import arecording, lookup  # sqlite: with a response cache only

        store, key = lookup(backend, request.messages, request.functions, request.cfg, settings)
        if store is not None:
            return arecording(store, key, lambda: _amodel_call(backend, request))
    return _amodel_call(backend, request)


def _amodel_call(backend: Backend, request: ModelRequest) -> AsyncIterator[list[Fragment]]:
    """`_model_call` for asyncio: the fragments, as an async iterator (returned, not wrapped: one layer less per
    chunk)."""
    prompted, request = _route(backend, request)
    if prompted:
        return fncall_prompt.achat(backend, request)
    native = backend.abackend_reply(request)
    if request.functions:  # a server that rejects tools: answered through the prompt
        native = fncall_prompt.afalling_back(backend, native, request)
        if recovers_calls(backend, request):
            native = arecover_calls(native, request, backend.model)
    if request.settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
        return fncall_prompt.StreamParser(parse_calls=False).arun(native)
    return native


def _route(backend: Backend, request: ModelRequest) -> tuple[bool, ModelRequest]:
    """(whether the tools go through a prompt, the request as it goes on: `request_timeout` in the backend's cfg)
    for one call, counted in the request's usage."""
    usage, settings = request.usage, request.settings
    if usage is not None:
        usage.calls += 1
        price = checked_price(settings.price) if settings.price is not None else price_of(backend.model)
        if price is not None:  # what the backend counts is priced
            request = request.replace(usage=PricedUsage(usage, price))
    if settings.request_timeout is not None:  # the one framework setting a backend applies itself
        request = request.replace(cfg={**request.cfg, "request_timeout": settings.request_timeout})
    raw_api = settings.use_raw_api
    prompted = not backend.native_tools or raw_api is False or (bool(settings.fncall_prompt_type) and not raw_api)
    # without tools too: earlier calls and results must reach the model as the prompt's text
    return prompted and bool(request.functions or _has_calls(request.messages)), request


def _has_calls(msgs: list[Message]) -> bool:
    return any(m.role == FUNCTION or m.function_call is not None for m in msgs)
