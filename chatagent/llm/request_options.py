"""One set of request settings across providers, read once from a call's cfg and mapped by each native backend onto
its protocol: `max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`, `reasoning_effort` ('minimal', 'low',
'medium', 'high', or a token budget), `response_format` (OpenAI's form), `tool_choice` and `parallel_tool_calls`
(generate_cfg's own, over `function_choice` / `parallel_function_calls`), `extra_body`, `extra_headers`.

A setting a provider cannot honour is never dropped in silence: `notice` logs it (once per provider and setting)
or the backend raises ValueError naming it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, cast

from chatagent.llm.settings import REASONING_EFFORTS, ToolChoice
from chatagent.utils import keys

logger = logging.getLogger("chatagent.llm")

EFFORTS = REASONING_EFFORTS
#: a reasoning effort as a thinking budget (tokens), for protocols that take a budget
EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_OURS = frozenset(
    {
        "max_tokens", "max_output_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop",
        "reasoning_effort", "response_format", "tool_choice", "parallel_tool_calls", "extra_body", "extra_headers",
        "request_timeout",
    }
)  # fmt: skip
_noticed: set[tuple[str, str]] = set()
_lock = threading.Lock()


@dataclass(slots=True)
class RequestOptions:
    """The settings of one call (see the module docstring); `rest`: every other key, sent into the body as it is."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list[str])
    reasoning_effort: str | int | None = None
    response_format: dict[str, Any] | None = None
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    extra_body: dict[str, Any] = field(default_factory=dict[str, Any])
    extra_headers: dict[str, str] = field(default_factory=dict[str, str])
    timeout: float | None = None
    rest: dict[str, Any] = field(default_factory=dict[str, Any])

    def thinking_budget(self) -> int | None:
        """`reasoning_effort` as a token budget (None: not asked; 0: 'none')."""
        effort = self.reasoning_effort
        if effort is None:
            return None
        if isinstance(effort, int):
            return effort
        return 0 if effort == "none" else EFFORT_BUDGETS[effort]

    def effort(self, provider: str) -> str | None:
        """`reasoning_effort` as an effort name; a budget becomes the nearest name, with a notice."""
        effort = self.reasoning_effort
        if effort is None or isinstance(effort, str):
            return effort
        name = min(EFFORT_BUDGETS, key=lambda k: abs(EFFORT_BUDGETS[k] - effort))
        notice(provider, "reasoning_effort", f"takes an effort, not a budget: {effort} tokens sent as {name!r}")
        return name

    def schema(self) -> tuple[str, dict[str, Any], bool] | None:
        """(name, JSON Schema, strict) of a `json_schema` response_format; None for none or `json_object`."""
        rf = self.response_format
        if not rf or rf.get("type") != "json_schema":
            return None
        spec = cast("dict[str, Any]", rf.get("json_schema") or {})
        return (
            str(spec.get("name") or "response"),
            cast("dict[str, Any]", spec.get("schema") or {}),
            bool(spec.get("strict", True)),
        )


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema as OpenAI's strict mode takes it: every object closed (`additionalProperties: false`) with all
    its properties required, those that were optional made nullable; `$defs` done the same way."""
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        required = set(cast("list[str]", out.get("required") or []))
        fixed: dict[str, Any] = {}
        for name, given in cast("dict[str, Any]", props).items():
            sub: Any = strict_schema(cast("dict[str, Any]", given)) if isinstance(given, dict) else given
            if name not in required and isinstance(given, dict):
                sub = {"anyOf": [sub, {"type": "null"}]}
            fixed[name] = sub
        out["properties"] = fixed
        out["required"] = list(fixed)
        out["additionalProperties"] = False
    for key in ("items",):
        if isinstance(out.get(key), dict):
            out[key] = strict_schema(cast("dict[str, Any]", out[key]))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [strict_schema(cast("dict[str, Any]", v)) if isinstance(v, dict) else v for v in out[key]]
    defs = out.get("$defs")
    if isinstance(defs, dict):
        out["$defs"] = {k: strict_schema(cast("dict[str, Any]", v)) for k, v in cast("dict[str, Any]", defs).items()}
    return out


def request_options(cfg: dict[str, Any], tool_choice: ToolChoice) -> RequestOptions:
    """The settings of `cfg` (a backend's per-call cfg) checked; ValueError naming a bad one."""
    opts = RequestOptions(tool_choice=tool_choice)
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        if cfg.get(key) is not None:
            opts.max_tokens = _int(cfg[key], key, 1)
    for key in ("temperature", "top_p"):
        if cfg.get(key) is not None:
            setattr(opts, key, _number(cfg[key], key))
    if cfg.get("top_k") is not None:
        opts.top_k = _int(cfg["top_k"], "top_k", 0)
    if cfg.get("seed") is not None:
        opts.seed = _int(cfg["seed"], "seed", None)
    stop = cfg.get("stop")
    if stop:
        opts.stop = [stop] if isinstance(stop, str) else [str(s) for s in cast("list[Any]", stop)]
    effort = cfg.get("reasoning_effort")
    if effort is not None:
        opts.reasoning_effort = checked_effort(effort)
    rf = cfg.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or cast("dict[str, Any]", rf).get("type") not in (
            "json_schema",
            "json_object",
            "text",
        ):
            raise ValueError(
                "generate_cfg['response_format'] must be {'type': 'json_schema', 'json_schema': {...}}, "
                f"{{'type': 'json_object'}} or {{'type': 'text'}}, got {rf!r:.80}"
            )
        opts.response_format = None if rf["type"] == "text" else cast("dict[str, Any]", rf)
    opts.tool_choice = _tool_choice(cfg, tool_choice)
    opts.extra_body = dict(cfg.get("extra_body") or {})
    opts.extra_headers = keys.clean_headers(cfg.get("extra_headers")) or {}
    if cfg.get("request_timeout") is not None:
        opts.timeout = float(cfg["request_timeout"])
    opts.rest = {k: v for k, v in cfg.items() if k not in _OURS and v is not None}
    return opts


def checked_effort(value: Any) -> str | int:
    """A `reasoning_effort`: one of EFFORTS, 'none', or a budget in tokens (an int >= 0); ValueError if not."""
    if isinstance(value, str) and value in (*EFFORTS, "none"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(
        f"generate_cfg['reasoning_effort'] must be one of {', '.join(EFFORTS)}, 'none', or a token budget "
        f"(an int >= 0), got {value!r}"
    )


def notice(provider: str, setting: str, why: str) -> None:
    """Log, once per provider and setting, that `setting` is not honoured as given (and why)."""
    with _lock:
        if (provider, setting) in _noticed:
            return
        _noticed.add((provider, setting))
    logger.warning("%s: generate_cfg[%r] %s", provider, setting, why)


def _tool_choice(cfg: dict[str, Any], given: ToolChoice) -> ToolChoice:
    """generate_cfg's own `tool_choice` (OpenAI's form or a name) and `parallel_tool_calls` over the framework's."""
    choice, parallel = given.choice, given.parallel
    raw = cfg.get("tool_choice")
    if raw is not None:
        if isinstance(raw, dict):
            fn = cast("dict[str, Any]", cast("dict[str, Any]", raw).get("function") or raw)
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"generate_cfg['tool_choice'] names no function: {raw!r:.80}")
            choice = name
        elif isinstance(raw, str) and raw.strip():
            choice = {"any": "required"}.get(raw.strip(), raw.strip())
        else:
            raise ValueError(f"generate_cfg['tool_choice'] must be 'auto', 'none', 'required' or a name, got {raw!r}")
    if cfg.get("parallel_tool_calls") is not None:
        if not isinstance(cfg["parallel_tool_calls"], bool):
            raise ValueError(
                f"generate_cfg['parallel_tool_calls'] must be True or False, got {cfg['parallel_tool_calls']!r}"
            )
        parallel = cfg["parallel_tool_calls"]
    return ToolChoice(choice, parallel)


def _int(value: Any, key: str, least: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
        raise ValueError(
            f"generate_cfg[{key!r}] must be an integer{f' >= {least}' if least is not None else ''}, got {value!r}"
        )
    return value


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"generate_cfg[{key!r}] must be a number >= 0, got {value!r}")
    return float(value)


__all__ = [
    "EFFORTS",
    "EFFORT_BUDGETS",
    "RequestOptions",
    "checked_effort",
    "notice",
    "request_options",
    "strict_schema",
]
