"""OpenTelemetry traces of runs, model calls and tool calls, with the GenAI semantic conventions.

    from chatagent.run import telemetry
    telemetry.instrument()                          # the global TracerProvider (or pass tracer_provider=...)
    ...                                              # every run now emits spans
    telemetry.uninstrument()

Each run is an `invoke_agent {name}` span; inside it each model call a `chat {model}` span (CLIENT) and each tool
call an `execute_tool {tool}` span; a sub-agent's run (a group chat member, a router's choice) nests inside its
parent's. Attributes: `gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.provider.name`,
`gen_ai.usage.input_tokens` / `output_tokens` (per call, and the run's total), `gen_ai.tool.name`,
`gen_ai.tool.call.id`, `error.type` and an ERROR status on failures. The conversation's content (messages, tool
arguments and results, and the text of errors, which may quote them: the status then says only the error's type)
is recorded only with `capture_content=True`.

Sampling: `instrument(provider, sample=0.1)` traces one top-level run in ten, chosen at random when it starts
(the runs inside it follow it); a run left out makes no span and no OpenTelemetry call at all, which is cheaper
than a sampler of the SDK (that still starts every span, only to drop it): `bench/control_overhead.py`.

Off by default: until `instrument()` is called nothing here is imported and runs build no events. It works through
the run's events (`chatagent.events`; of those, runs build only the ones it handles: run_start, llm_end, tool_end,
run_end), so spans are made in the thread iterating the run, with the start and end
times of what they measure (tools that ran in parallel overlap as they did), under `run()` and `arun()` alike.
Needs the `otel` extra (opentelemetry-api; an SDK or distro to export the spans).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, cast

from chatagent.run.events import TOOL_END, Callbacks, Event, add_global_callback, remove_global_callback
from chatagent.schema import Message
from chatagent.utils.extras import missing_dependency

_PROVIDERS = {"oai": "openai", "azure": "azure.ai.openai", "dashscope": "dashscope", "local": "llama_cpp"}
_installed: _Tracing | None = None
_LEFT_OUT = ("left out", None)  # a run's `trace` when sampling left it out (and the runs inside it)


def instrument(tracer_provider: Any = None, *, capture_content: bool = False, sample: float = 1.0) -> _Tracing:
    """Emit spans for runs from now on (to `tracer_provider`, or OpenTelemetry's global one): every run, or with
    `sample` < 1 that share of top-level runs, chosen at random (the runs inside one follow it). Calling it again
    replaces the earlier setting. Returns the callback it installed."""
    global _installed
    given = cast(object, sample)  # what callers pass is checked, whatever its declared type
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not 0 <= sample <= 1:
        raise ValueError(f"sample must be a number from 0 to 1 (the share of runs traced), got {sample!r}")
    try:
        from opentelemetry import trace
    except ModuleNotFoundError as e:
        raise missing_dependency(e, "chatagent.run.telemetry") from None
    uninstrument()
    tracer = trace.get_tracer("chatagent", tracer_provider=tracer_provider)
    _installed = _Tracing(tracer, capture_content, float(sample))
    add_global_callback(_installed)
    return _installed


def uninstrument() -> None:
    """Stop emitting spans (runs already started finish theirs)."""
    global _installed
    if _installed is not None:
        remove_global_callback(_installed)
        _installed = None


class _Tracing(Callbacks):
    """Spans from a run's events: the run's span (and its context) is kept in its RunContext (`trace`) while it
    lasts; model and tool spans are made when they end, with the times they started and ended. A run that sampling
    leaves out drops this callback from its callbacks (and so from the runs inside it): it builds no more events
    for it."""

    def __init__(self, tracer: Any, capture_content: bool, sample: float = 1.0) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        self.capture_content = capture_content
        self.sample = sample
        self._in_context = trace.set_span_in_context
        self._client, self._internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self._error: Callable[[str], Any] = lambda text: Status(StatusCode.ERROR, text)
        self._chats: dict[tuple[str, str], tuple[str, str, str]] = {}  # (model, model_type): its span's name...

    @staticmethod
    def _parent(run: Any) -> Any:
        """The OpenTelemetry context a span of `run` goes under: the run's span's, else (a run's own span) its
        parent run's, else None (the current context); _LEFT_OUT when sampling left the run out."""
        while run is not None:
            trace = run.trace
            if trace is not None:
                return _LEFT_OUT if trace is _LEFT_OUT else trace[1]
            run = run.parent
        return None

    def on_run_start(self, event: Event) -> None:
        run = event.run
        if run is None:
            return
        outer = run.parent
        parent = None if outer is None else self._parent(outer)
        if parent is _LEFT_OUT or (outer is None and self.sample < 1 and random.random() >= self.sample):
            run.trace = _LEFT_OUT
            run.callbacks = tuple(cb for cb in run.callbacks if cb is not self)
            return
        name = event.agent or "agent"
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        span = self.tracer.start_span(
            f"invoke_agent {name}", parent, self._internal, attributes, start_time=int(event.time * 1e9)
        )
        run.trace = (span, self._in_context(span))  # the span, and the context its children go under

    def on_run_end(self, event: Event) -> None:
        run = event.run
        trace = None if run is None else run.trace
        if trace is None or trace is _LEFT_OUT:
            return
        span = trace[0]
        usage = event.usage
        if usage is not None:
            span.set_attributes(
                {"gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens}
            )
        if event.error:
            self._failed(span, event.error, _error_type(event.error))
        span.end(end_time=int(event.time * 1e9))

    def on_llm_end(self, event: Event) -> None:
        run = event.run
        trace = None if run is None else run.trace
        parent = trace[1] if trace is not None and trace is not _LEFT_OUT else self._parent(run)
        if parent is _LEFT_OUT:
            return
        data = event.data
        key = (data.get("model") or "unknown", data.get("model_type") or "")
        known = self._chats.get(key)
        if known is None:
            model, model_type = key
            known = self._chats[key] = (f"chat {model}", model, _PROVIDERS.get(model_type, model_type or "unknown"))
        name, model, provider = known
        usage = event.usage
        if usage is None:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": provider,
            }  # fmt: skip
        else:
            attributes = {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": provider,
                "gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens,
            }  # fmt: skip
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _messages_json(data.get("input") or [])
            attributes["gen_ai.output.messages"] = _messages_json(data.get("output") or [])
        self._closed_span(name, self._client, attributes, event, parent)

    def on_tool_end(self, event: Event) -> None:
        run = event.run
        trace = None if run is None else run.trace
        parent = trace[1] if trace is not None and trace is not _LEFT_OUT else self._parent(run)
        if parent is _LEFT_OUT:
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool or "",
            "gen_ai.tool.type": "function",
        }
        if event.call_id:
            attributes["gen_ai.tool.call.id"] = event.call_id
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = event.arguments or ""
            result = event.result
            attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else _json(result)
        self._closed_span(f"execute_tool {event.tool}", self._internal, attributes, event, parent)

    def _closed_span(self, name: str, kind: Any, attributes: dict[str, Any], e: Event, parent: Any) -> None:
        end = int(e.time * 1e9)
        span = self.tracer.start_span(name, parent, kind, attributes, start_time=end - int((e.duration or 0.0) * 1e9))
        if e.error:
            error_type = e.data.get("error_kind") if e.kind == TOOL_END else _error_type(e.error)
            self._failed(span, e.error, error_type or "")
        span.end(end_time=end)

    def _failed(self, span: Any, text: str, error_type: str) -> None:
        span.set_attribute("error.type", error_type or "_OTHER")
        # an error's text may quote the prompt, a document or a tool's arguments: content, kept out unless asked for
        span.set_status(self._error(text[:300] if self.capture_content else error_type or "_OTHER"))


def _error_type(error: str) -> str:
    """The exception class name at the start of an event's error text ('cancelled' for a run closed early)."""
    if error == "closed before the end":
        return "cancelled"
    head = error.split(":", 1)[0]
    return head if head.isidentifier() else "_OTHER" if error else ""


def _messages_json(messages: list[Any]) -> str:
    return _json([m.model_dump() if isinstance(m, Message) else m for m in messages])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


__all__ = ["instrument", "uninstrument"]
