"""The body of a Gemini `generateContent` / `streamGenerateContent` request: `contents` of `user` and `model` turns
(`text`, `inlineData`, `fileData`, `functionCall`, `functionResponse` parts, the thought signatures of earlier
turns put back on their parts), `systemInstruction`, `tools` as function declarations, `toolConfig`, and
`generationConfig` (sampling, `seed`, stop sequences, `thinkingConfig`, `responseSchema`).

Gemini's schemas are an OpenAPI subset: `gemini_schema` turns a JSON Schema into one (`$ref`s inlined, the type
names upper case, a type list with null as `nullable`, keywords it lacks left out).
"""

from __future__ import annotations

import mimetypes
from typing import Any, cast

from chatagent.llm.request_options import RequestOptions, notice
from chatagent.llm.turns import Call, Turn, call_input, conversation_turns, media_data, placeholder, system_text
from chatagent.schema import ContentItem, Message, content_text

PROVIDER = "gemini"
_SCHEMA_KEYS = {
    "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "minProperties", "maxProperties",
    "minLength", "maxLength", "pattern", "example", "default", "minimum", "maximum", "propertyOrdering",
}  # fmt: skip
_OURS = frozenset({"cached_content"})  # cfg keys this backend maps itself


def request_body(
    messages: list[Message], functions: list[dict[str, Any]] | None, opts: RequestOptions, cfg: dict[str, Any]
) -> dict[str, Any]:
    """The JSON body of one request."""
    body: dict[str, Any] = {"contents": gemini_contents(conversation_turns(messages))}
    system = system_text(messages)
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if functions:
        declarations = [
            {"name": f["name"], "description": f.get("description") or "", **_parameters(f)} for f in functions
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
        config = _calling_config(opts)
        if config is not None:
            body["toolConfig"] = {"functionCallingConfig": config}
    generation: dict[str, Any] = {}
    for key, value in (
        ("temperature", opts.temperature), ("topP", opts.top_p), ("topK", opts.top_k),
        ("maxOutputTokens", opts.max_tokens), ("seed", opts.seed),
    ):  # fmt: skip
        if value is not None:
            generation[key] = value
    if opts.stop:
        generation["stopSequences"] = opts.stop
    budget = opts.thinking_budget()
    if budget is not None:
        generation["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": budget > 0}
    schema = opts.schema()
    if schema is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseSchema"] = gemini_schema(schema[1])
    elif opts.response_format is not None:
        generation["responseMimeType"] = "application/json"
    if generation:
        body["generationConfig"] = generation
    if cfg.get("cached_content"):
        body["cachedContent"] = cfg["cached_content"]
    body.update({k: v for k, v in opts.rest.items() if k not in _OURS})
    body.update(opts.extra_body)
    return body


def gemini_contents(turns: list[Turn]) -> list[dict[str, Any]]:
    """The turns as `contents`; a model turn gets back the thought signatures its reply carried."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "assistant":
            parts = _model_parts(turn)
            if parts:
                out.append({"role": "model", "parts": parts})
            continue
        parts = [
            {"functionResponse": {"name": r.name, "response": {"result": _result(r.content)}}} for r in turn.results
        ]
        parts += _user_parts(turn.content)
        if parts:
            out.append({"role": "user", "parts": parts})
    return out


def _model_parts(turn: Turn) -> list[dict[str, Any]]:
    state = turn.state if turn.state is not None and turn.state.get("provider") == PROVIDER else {}
    signatures = cast("list[Any]", state.get("signatures") or [])  # one per part, in the reply's order
    parts: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, Call):
            parts.append({"functionCall": {"name": part.name, "args": call_input(part.arguments)}})
        elif part:
            parts.append({"text": part})
    for part, signature in zip(parts, signatures, strict=False):
        if isinstance(signature, str) and signature:
            part["thoughtSignature"] = signature
    return parts


def _user_parts(content: list[ContentItem]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for item in content:
        if item.kind == "text":
            if item.value:
                parts.append({"text": item.value})
        elif item.kind in ("image", "audio", "video", "file"):
            data = media_data(item.value)
            if isinstance(data, str):
                parts.append({"fileData": {"fileUri": data, "mimeType": _mime_of_url(data, item.kind)}})
            else:
                parts.append({"inlineData": {"mimeType": data[0], "data": data[1]}})
        else:
            parts.append({"text": placeholder(item)})
    return parts


def _mime_of_url(url: str, kind: str) -> str:
    return mimetypes.guess_type(url.split("?", 1)[0])[0] or {"image": "image/png", "file": "application/pdf"}.get(
        kind, "application/octet-stream"
    )


def _result(content: str | list[ContentItem]) -> str:
    return content if isinstance(content, str) else content_text(content)


def _parameters(f: dict[str, Any]) -> dict[str, Any]:
    schema = f.get("parameters")
    if not isinstance(schema, dict) or not cast("dict[str, Any]", schema).get("properties"):
        return {}  # a function without arguments declares none
    return {"parameters": gemini_schema(cast("dict[str, Any]", schema))}


def _calling_config(opts: RequestOptions) -> dict[str, Any] | None:
    tc = opts.tool_choice
    if not tc.parallel:
        notice(PROVIDER, "parallel_tool_calls", "has no Gemini setting: the model may still call several at once")
    if tc.choice == "auto":
        return None
    if tc.choice == "none":
        return {"mode": "NONE"}
    if tc.choice == "required":
        return {"mode": "ANY"}
    return {"mode": "ANY", "allowedFunctionNames": [tc.choice]}


def gemini_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON Schema as Gemini's Schema object (see the module docstring)."""
    if defs is None:
        defs = cast("dict[str, Any]", schema.get("$defs") or schema.get("definitions") or {})
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        merged = {**cast("dict[str, Any]", target or {}), **{k: v for k, v in schema.items() if k != "$ref"}}
        return gemini_schema(merged, defs)
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in cast("list[Any]", kind) if k != "null"]
        if len(kinds) != len(cast("list[Any]", kind)):
            out["nullable"] = True
        kind = kinds[0] if kinds else None
    if isinstance(kind, str):
        out["type"] = kind.upper()
    for key, value in schema.items():
        if key in _SCHEMA_KEYS:
            out[key] = value
    props = schema.get("properties")
    if isinstance(props, dict):
        out["properties"] = {
            str(k): gemini_schema(cast("dict[str, Any]", v), defs) for k, v in cast("dict[str, Any]", props).items()
        }
        if "type" not in out:
            out["type"] = "OBJECT"
    if isinstance(schema.get("required"), list):
        out["required"] = schema["required"]
    if isinstance(schema.get("items"), dict):
        out["items"] = gemini_schema(cast("dict[str, Any]", schema["items"]), defs)
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list):
        options = [cast("dict[str, Any]", v) for v in cast("list[Any]", variants) if isinstance(v, dict)]
        real = [v for v in options if v.get("type") != "null"]
        if len(real) < len(options):
            out["nullable"] = True
        if len(real) == 1:
            out.update({k: v for k, v in gemini_schema(real[0], defs).items() if k not in out})
        elif real:
            out["anyOf"] = [gemini_schema(v, defs) for v in real]
    return out


__all__ = ["PROVIDER", "gemini_contents", "gemini_schema", "request_body"]
