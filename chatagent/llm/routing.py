"""Where one model call goes: the response cache, prompt-based function calling (`chatagent.llm.fncall_prompt`),
or the backend's own reply (`Backend.backend_reply`), with calls a server left in the text recovered
(`chatagent.llm.recovered_calls`) and `<think>` text parsed out when asked. `plan(backend, request)` says so as a
`ReplyPlan` (the request the backend gets, the reply filters its answer goes through, what to fall back to), which
`reply(SYNC)` carries out in the calling thread and `reply(ASYNC)` on an event loop."""

from __future__ import annotations

from collections.abc import Sequence

from chatagent.errors import ModelServiceError
from chatagent.llm import fncall_prompt
from chatagent.llm.prices import PricedUsage, checked_price, price_of
from chatagent.llm.pumps import ReplyFilter
from chatagent.llm.recovered_calls import CallRecovery, recovers_calls
from chatagent.llm.request import Backend, ModelRequest, ReplyPlan
from chatagent.schema import FUNCTION, Message


def plan(backend: Backend, request: ModelRequest) -> ReplyPlan:
    """How `request` is answered: from the response cache when its settings ask for one, else by the backend."""
    settings = request.settings
    if settings.cache or settings.cache_dir:
        from chatagent.llm.cache import lookup  # sqlite: with a response cache only

        store, key = lookup(backend, request.messages, request.functions, request.cfg, settings)
        if store is not None:  # the call is routed (and counted) only when the cache does not answer
            return ReplyPlan(backend, request, cache=(store, key, lambda: _routed(backend, request)))
    return _routed(backend, request)


def _routed(backend: Backend, request: ModelRequest) -> ReplyPlan:
    prompted, request = _route(backend, request)
    if prompted:
        return _prompted(backend, request, ())
    filters: list[ReplyFilter] = []
    if recovers_calls(backend, request):  # calls a self-hosted server left in the text
        filters.append(
            CallRecovery(request.functions or [], backend.model, request.messages, request.settings.max_calls_per_reply)
        )
    if request.settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
        filters.append(fncall_prompt.StreamParser(parse_calls=False))
    if not request.functions:
        return ReplyPlan(backend, request, filters)

    def instead(e: ModelServiceError) -> ReplyPlan:  # a server that rejects tools: answered through the prompt
        fncall_prompt.give_up_native_tools(backend, e)
        return _prompted(backend, request, filters)

    return ReplyPlan(backend, request, filters, instead)


def _prompted(backend: Backend, request: ModelRequest, then: Sequence[ReplyFilter]) -> ReplyPlan:
    """`request` answered through the prompt: the backend asked without functions, its text parsed for calls, then
    read through `then`."""
    prompted, parser = fncall_prompt.prompt_request(request)
    return ReplyPlan(backend, prompted, [parser, *then])


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


__all__ = ["plan"]
