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

Off by default: until `instrument()` is called nothing here is imported and runs build no events. It is a listener
of the run's events (`chatagent.events`, the one place a run's events are emitted, which callbacks, the typed event
stream and the trace recorder listen to as well), a global callback: on run_start it decides whether the run is
traced and starts its span, kept in the run's context (`RunContext.trace`, a `RunTrace`); its llm_end, tool_end and
run_end events each make their span (the run's own ends with run_end). So spans are made in the thread iterating
the run, with the start and end times of what they measure (tools that ran in parallel overlap as they did), under
`run()` and `arun()` alike. A run left out drops this callback from its callbacks (and so from the runs inside it):
it builds no event for it. Needs the `otel` extra (opentelemetry-api; an SDK or distro to export the spans).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, cast

from chatagent.run.events import Callbacks, Event, add_global_callback, remove_global_callback
from chatagent.schema import Message
from chatagent.utils.extras import missing_dependency

_PROVIDERS = {"oai": "openai", "azure": "azure.ai.openai", "dashscope": "dashscope", "local": "llama_cpp"}
_installed: _Tracing | None = None


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
    """Starts a span for each run it traces (on run_start) and keeps it, with how to make the spans under it, in
    the run's context as a RunTrace, which the run's llm_end, tool_end and run_end events then go to."""

    def __init__(self, tracer: Any, capture_content: bool, sample: float = 1.0) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        self.capture_content = capture_content
        self.sample = sample
        self.in_context = trace.set_span_in_context
        self.client, self.internal = SpanKind.CLIENT, SpanKind.INTERNAL
        self.error: Callable[[str], Any] = lambda text: Status(StatusCode.ERROR, text)
        self.chats: dict[tuple[str, str], tuple[str, str, str]] = {}  # (model, model_type): span name, model, provider

    def on_run_start(self, event: Event) -> None:
        run = event.run
        if run is None:
            return
        outer = run.parent
        while outer is not None and outer.trace is None:  # (a run inside it is traced under the nearest traced one)
            outer = outer.parent
        if outer is None and self.sample < 1 and random.random() >= self.sample:
            run.callbacks = tuple(cb for cb in run.callbacks if cb is not self)  # left out, with the runs inside it
            return
        name = event.agent or "agent"
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        parent = None if outer is None else outer.trace.context  # None: under the current span, if any
        span = self.tracer.start_span(
            f"invoke_agent {name}", parent, self.internal, attributes, start_time=int(event.time * 1e9)
        )
        run.trace = RunTrace(self, span, self.in_context(span))

    def on_llm_end(self, event: Event) -> None:
        trace = self._trace(event)
        if trace is not None:
            trace.llm_end(event)

    def on_tool_end(self, event: Event) -> None:
        trace = self._trace(event)
        if trace is not None:
            trace.tool_end(event)

    def on_run_end(self, event: Event) -> None:
        trace = self._trace(event)
        if trace is not None:
            trace.end(event.usage, event.error)

    def _trace(self, event: Event) -> RunTrace | None:
        """The RunTrace this tracing keeps in the run `event` happened in, if it traces that run."""
        trace = getattr(event.run, "trace", None)
        return trace if isinstance(trace, RunTrace) and trace.tracing is self else None


class RunTrace:
    """A traced run's span and the context its children go under; its run's events go to `llm_end`, `tool_end` and
    `end` as they happen, and each makes its span (the run's own ends with `end`)."""

    __slots__ = ("tracing", "span", "context")

    def __init__(self, tracing: _Tracing, span: Any, context: Any) -> None:
        self.tracing = tracing
        self.span = span
        self.context = context

    def llm_end(self, event: Event) -> None:
        """A model call ended (its llm_end event: `data` has its model, messages sent and reply; `usage` its own)."""
        tracing, data, usage = self.tracing, event.data, event.usage
        key = (data.get("model") or "unknown", data.get("model_type") or "")
        known = tracing.chats.get(key)
        if known is None:
            model, model_type = key
            known = tracing.chats[key] = (f"chat {model}", model, _PROVIDERS.get(model_type, model_type or "unknown"))
        name, model, provider = known
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": provider,
            "gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens,
        }  # fmt: skip
        if tracing.capture_content:
            attributes["gen_ai.input.messages"] = _messages_json(data.get("input") or [])
            attributes["gen_ai.output.messages"] = _messages_json(data.get("output") or [])
        end = int(event.time * 1e9)
        start = end - int((event.duration or 0.0) * 1e9)
        error = event.error
        self._closed(name, tracing.client, attributes, start, end, error and (error, _error_type(error)))

    def tool_end(self, event: Event) -> None:
        """A tool call ended (its tool_end event: `data['error_kind']` says how it failed, if it did)."""
        tracing = self.tracing
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool or "",
            "gen_ai.tool.type": "function",
        }  # fmt: skip
        if event.call_id:
            attributes["gen_ai.tool.call.id"] = event.call_id
        result = event.result
        if tracing.capture_content:
            attributes["gen_ai.tool.call.arguments"] = event.arguments or ""
            attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else _json(result)
        end = int(event.time * 1e9)
        start = end - int((event.duration or 0.0) * 1e9)
        kind = event.data.get("error_kind")
        self._closed(
            f"execute_tool {event.tool}", tracing.internal, attributes, start, end, kind and (str(result), kind)
        )

    def end(self, usage: Any, error: str | None) -> None:
        """The run ended (`error`: why it failed, None if it did not), having used `usage` in all."""
        span = self.span
        span.set_attributes(
            {"gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens}
        )
        if error:
            self._failed(span, error, _error_type(error))
        span.end()

    def _closed(self, name: str, kind: Any, attributes: dict[str, Any], start: int, end: int, failed: Any) -> None:
        """A span from `start` to `end` (ns), under the run's; `failed`: (the error's text, its type) if it did."""
        span = self.tracing.tracer.start_span(name, self.context, kind, attributes, start_time=start)
        if failed:
            self._failed(span, *failed)
        span.end(end_time=end)

    def _failed(self, span: Any, text: str, error_type: str) -> None:
        span.set_attribute("error.type", error_type or "_OTHER")
        # an error's text may quote the prompt, a document or a tool's arguments: content, kept out unless asked for
        span.set_status(self.tracing.error(text[:300] if self.tracing.capture_content else error_type or "_OTHER"))


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


__all__ = ["RunTrace", "instrument", "uninstrument"]
