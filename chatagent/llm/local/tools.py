"""Tools on the embedded model: llama.cpp's constrained decoding makes every reply an answer or a well-formed call.

A GGUF chat template without tools (SmolLM2's) gets the tools described in the system message, and the request a
JSON schema as its grammar (llama.cpp's `json_schema` field): the model can only write

    {"answer": "..."}                                   the answer, streamed as text as it is decoded
    {"tool": "<an offered tool>", "arguments": {...}}   one call, its arguments valid for that tool's parameters

so a call always names a tool that exists with arguments of the right shape, and a small model cannot drift into
prose that looks like a call. Earlier calls and results are written into the conversation the same way (a result
as a user message, since such templates have no tool role). After a tool's result, the next reply is an answer:
a small model asked again would call again, so the embedded model makes one round of calls per question.
`function_choice` is honoured for the first reply: 'none' answers, 'required' calls, a tool's name calls that tool.

A 135M model does not choose well between answering and calling (0 of 20 tool questions in bench/local_tools.py),
so with the `[embed]` extra the choice is made before it is asked (`routed_request`): `chatagent.llm.local.tool_router`
picks the tool the question needs, or none. No tool: the question goes to the model as plain chat, no grammar and no
tool prompt, so its first text comes as fast as without tools. A tool (chosen, or named by `function_choice`): the
model only writes that tool's arguments, asked with the question alone under `chatagent.llm.local.argument_grammar`'s
grammar (names quoted from the question, numbers from it). Without the extra, the model chooses under the grammar
above (said once in the log).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from chatagent.llm.cut_off import cut_call_error
from chatagent.llm.local.argument_grammar import argument_grammar
from chatagent.llm.local.tool_router import ToolRouter
from chatagent.llm.pumps import Blocking, Plan, Relay, ReplyFilter
from chatagent.llm.request import Usage
from chatagent.llm.settings import ToolChoice
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, FunctionCall, Message, content_text
from chatagent.schema.fragment import STREAMING_CALL, Fragment
from chatagent.schema.stop_reason import StopReason

_make = Fragment.unchecked

TOOLS_PROMPT = """You can use these tools:
{tools}

Reply with JSON only. To use a tool, write {{"tool": "<tool name>", "arguments": {{...}}}}. Use a tool only when \
the question needs it (current data, calculations, lookups); otherwise answer directly with {{"answer": "..."}}.
Examples:
User: Who wrote Hamlet?
{{"answer": "William Shakespeare wrote Hamlet."}}
User: {example_question}
{example_call}"""
ANSWER_ONLY = 'Reply with JSON only: {"answer": "..."}, using the tool results above.'
ARGUMENTS_PROMPT = (
    "Fill in the arguments of the tool {name} ({description}) from the user's message. Reply with JSON only."
)
_HEAD = re.compile(r'\s*\{\s*"(answer|tool)"\s*:\s*("?)')
# JSON Schema keywords llama.cpp's converter understands, kept from a tool's parameters (the rest is dropped)
_KEEP = frozenset({"type", "properties", "required", "enum", "const", "items", "anyOf", "oneOf", "minimum", "maximum",
                   "minItems", "maxItems", "minLength", "maxLength", "pattern", "format"})  # fmt: skip


def constrained_request(
    messages: list[Message], functions: list[dict[str, Any]], choice: ToolChoice
) -> tuple[list[Message], dict[str, Any]]:
    """The conversation as the model gets it (tools in the system message, calls and results as text) and the
    request's grammar: {'json_schema': ...}."""
    answer_only = choice.choice == "none" or not functions
    answer_only = answer_only or (bool(messages) and messages[-1].role == FUNCTION)  # one round of calls
    offered = (
        functions if choice.choice in ("auto", "required") else [f for f in functions if f["name"] == choice.choice]
    )
    options: list[dict[str, Any]] = []
    if choice.choice == "auto" or answer_only:
        options.append(_object({"answer": {"type": "string"}}))
    if not answer_only:
        options += [_object({"tool": {"const": f["name"]}, "arguments": _params(f)}) for f in offered]
    if not functions or answer_only:  # an answer needs no tool descriptions (a shorter prompt)
        return _render(messages, ANSWER_ONLY), {"json_schema": options[0]}
    system = TOOLS_PROMPT.format(
        tools="\n".join(f"- {f['name']}: {f.get('description') or ''} Arguments: {json.dumps(_params(f))}" for f in functions),
        example_question=f"(a question that needs {offered[0]['name'] if offered else functions[0]['name']})",
        example_call=_call_json(offered[0] if offered else functions[0]),
    )  # fmt: skip
    return _render(messages, system), {"json_schema": options[0] if len(options) == 1 else {"anyOf": options}}


def routed_request(
    messages: list[Message], functions: list[dict[str, Any]], choice: ToolChoice, router: ToolRouter | None
) -> tuple[list[Message], dict[str, Any], str | None] | None:
    """The request when the tool is chosen before the model is asked (see the module docstring): the messages, the
    grammar ({} for plain chat) and the tool whose arguments the reply is; None when `constrained_request` is
    the way (no router for 'auto' or 'required', an answer after results, no question)."""
    if not functions or not messages or messages[-1].role != USER:
        return None
    if choice.choice == "none":
        return None if has_calls(messages) else (list(messages), {}, None)
    question = content_text(messages[-1].content).strip()
    if not question:
        return None
    if choice.choice in ("auto", "required"):
        if router is None:
            return None
        name = router.choose(question, functions, required=choice.choice == "required")
        if name is None and has_calls(messages):  # earlier calls are in the conversation as text
            return _render(messages, ANSWER_ONLY), {"json_schema": _object({"answer": {"type": "string"}})}, None
        if name is None:
            return list(messages), {}, None
    else:
        name = choice.choice
    function = next((f for f in functions if f["name"] == name), None)
    if function is None:  # a function_choice naming no offered tool: as before
        return None
    grammar = argument_grammar(function, question)
    system = ARGUMENTS_PROMPT.format(name=name, description=function.get("description") or "")
    request = [Message.unchecked(SYSTEM, system), Message.unchecked(USER, question)]
    return request, {"grammar": grammar} if grammar else {"json_schema": _params(function)}, name


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _params(function: dict[str, Any]) -> dict[str, Any]:
    schema = _kept(function.get("parameters") or {})
    if schema.get("type") == "object" and "properties" in schema:
        schema["additionalProperties"] = False
    return schema or {"type": "object"}


def _kept(schema: Any) -> Any:
    """A JSON schema with only the keywords llama.cpp's grammar converter takes."""
    if isinstance(schema, list):
        return [_kept(s) for s in schema]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():  # pyright: ignore[reportUnknownVariableType]
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _kept(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        elif key in _KEEP:
            out[key] = _kept(value)
    return out


def _call_json(function: dict[str, Any]) -> str:
    """An example call of `function` (its required arguments filled with placeholders)."""
    params: dict[str, Any] = function.get("parameters") or {}
    props: dict[str, dict[str, Any]] = params.get("properties") or {}
    example = {k: "..." if (v or {}).get("type", "string") == "string" else 1 for k, v in props.items()}
    return json.dumps({"tool": function["name"], "arguments": example}, ensure_ascii=False)


def _render(messages: list[Message], tools_prompt: str) -> list[Message]:
    """The conversation for a template without tools: the tools in the system message, calls as the JSON the model
    writes, results as user messages."""
    out: list[Message] = []
    rest = messages
    if messages and messages[0].role == SYSTEM:
        tools_prompt = content_text(messages[0].content) + "\n\n" + tools_prompt
        rest = messages[1:]
    out.append(Message.unchecked(SYSTEM, tools_prompt))
    for m in rest:
        if m.role == ASSISTANT and m.function_call is not None:
            text = _call_text(m.function_call)
        elif m.role == ASSISTANT:
            text = json.dumps({"answer": content_text(m.content)}, ensure_ascii=False) if m.content else ""
            if not text:
                continue
        elif m.role == FUNCTION:
            out.append(Message.unchecked(USER, f"Result of {m.name}: {content_text(m.content)}"))
            continue
        else:
            out.append(m)
            continue
        out.append(Message.unchecked(ASSISTANT, text))
    return _merged(out)


def _call_text(call: FunctionCall) -> str:
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        args = call.arguments
    return json.dumps({"tool": call.name, "arguments": args}, ensure_ascii=False)


def _merged(messages: list[Message]) -> list[Message]:
    """Consecutive messages of one role as one (a chat template expects turns to alternate)."""
    out: list[Message] = []
    for m in messages:
        if out and out[-1].role == m.role and m.role != SYSTEM and isinstance(m.content, str):
            prev = out[-1]
            out[-1] = Message.unchecked(m.role, content_text(prev.content) + "\n" + m.content)
        else:
            out.append(m)
    return out


class ConstrainedReply(ReplyFilter):
    """The model's JSON reply read as it streams: an answer's text as it is decoded, a call when it is complete. When
    the reply is a chosen tool's arguments, they stream out as they are decoded (`STREAMING_CALL`), the complete call
    replacing them at the end."""

    def __init__(self, tool: str | None = None) -> None:
        """`tool`: the reply is that tool's arguments object (the call's whole JSON when None)."""
        self.raw = ""
        self.tool = tool
        self.call_id: str | None = None  # once the chosen tool's call is shown
        self.kind: str | None = "tool" if tool else None  # 'answer' or 'tool', once the key is read
        self.pos = 0  # in an answer: where its string's next character is
        self.done = False  # the answer's closing quote was read
        self.cut = False

    def push(self, fragments: list[Fragment]) -> list[Fragment]:
        out: list[Fragment] = []
        for f in fragments:
            if f.extra and f.extra.get("stop_reason") == StopReason.LENGTH:
                self.cut = True
            if f.content:
                piece = f.content if isinstance(f.content, str) else content_text(f.content)
                self.raw += piece
                if self.tool:
                    out.append(self._arguments(piece))
            if f.extra or f.reasoning_content:
                out.append(_make(ASSISTANT, "", None, None, f.reasoning_content, f.extra, 0))
        text = self._text()
        return ([_make(ASSISTANT, text, None, None, None, None, 0)] if text else []) + out

    def _arguments(self, piece: str) -> Fragment:
        """A piece of the chosen tool's arguments, shown at index 0 (with the call's name and id first)."""
        if self.call_id is None:
            self.call_id = _call_id()
            extra = {"function_id": self.call_id, STREAMING_CALL: {"name": self.tool, "arguments": piece}}
        else:
            extra = {STREAMING_CALL: {"arguments": piece}}
        return _make(ASSISTANT, "", None, None, None, extra, 0)

    def _text(self) -> str:
        """The answer's text decoded since the last call (none before the key is read, none for a call)."""
        if self.kind is None:
            m = _HEAD.match(self.raw)
            if m is None or (m.group(1) == "answer" and not m.group(2)):
                return ""
            self.kind, self.pos = m.group(1), m.end()
        if self.kind != "answer" or self.done:
            return ""
        raw, i = self.raw, self.pos
        out: list[str] = []
        while i < len(raw):
            c = raw[i]
            if c == '"':
                self.done = True
                i += 1
                break
            if c != "\\":
                j = i
                while j < len(raw) and raw[j] not in '"\\':
                    j += 1
                out.append(raw[i:j])
                i = j
                continue
            escape = _escape_at(raw, i)
            if escape is None:  # not all of it yet
                break
            out.append(escape[0])
            i = escape[1]
        self.pos = i
        return "".join(out)

    def end(self) -> list[Fragment]:
        if self.kind == "tool":
            try:
                obj = json.loads(self.raw)
            except ValueError:
                if self.cut:
                    raise cut_call_error() from None
                raise
            name, args = (self.tool, obj) if self.tool else (obj["tool"], obj.get("arguments"))
            call = FunctionCall(name, json.dumps(args or {}, ensure_ascii=False))
            shown = self.call_id is not None
            return [_make(ASSISTANT, "", None, call, None, {"function_id": self.call_id or _call_id()}, 0, shown)]
        if self.kind is None:  # cut before the key, or no grammar: what came is the answer
            return [_make(ASSISTANT, self.raw.strip(), None, None, None, None, 0)]
        return []


def _escape_at(raw: str, i: int) -> tuple[str, int] | None:
    """The character of the JSON escape at raw[i] and where the text goes on; None if it is not all there yet."""
    if i + 1 >= len(raw):
        return None
    c = raw[i + 1]
    if c != "u":
        return {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(c, c), i + 2
    if i + 6 > len(raw):
        return None
    code = int(raw[i + 2 : i + 6], 16)
    if 0xD800 <= code < 0xDC00:  # a surrogate pair: the low half follows
        if i + 12 > len(raw):
            return None
        low = int(raw[i + 8 : i + 12], 16)
        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), i + 12
    return chr(code), i + 6


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def has_calls(messages: list[Message]) -> bool:
    return any(m.role == FUNCTION or m.function_call is not None for m in messages)


def _request(
    messages: list[Message], functions: list[dict[str, Any]] | None, choice: ToolChoice, router: ToolRouter | None
) -> tuple[list[Message], dict[str, Any], ConstrainedReply | None]:
    """The messages, the grammar and the reader of the reply (None: plain chat, read as it comes)."""
    routed = routed_request(messages, functions or [], choice, router)
    if routed is not None:
        msgs, grammar, tool = routed
        return msgs, grammar, ConstrainedReply(tool) if grammar else None
    msgs, grammar = constrained_request(messages, functions or [], choice if functions else ToolChoice("none"))
    return msgs, grammar, ConstrainedReply()


def constrained_stream(
    stream: Callable[..., Iterator[list[Fragment]] | AsyncIterator[list[Fragment]]],
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    cfg: dict[str, Any],
    usage: Usage | None,
    choice: ToolChoice,
    router: ToolRouter | None = None,
) -> Plan:
    """The reply of `stream` (a backend's `_chat_stream` or `_achat_stream`, asked without tools) to `messages` with
    `functions` offered: the tool chosen by `router` or the model under the grammar (see the module docstring). A
    plan: on an event loop (`aplayed`) a router's embedding of the question (~20 ms of CPU) runs in a worker thread."""
    if router is None:
        msgs, grammar, reader = _request(messages, functions, choice, router)
    else:
        routed = Blocking(_request, messages, functions, choice, router)
        yield routed
        request: tuple[list[Message], dict[str, Any], ConstrainedReply | None] = routed.result
        msgs, grammar, reader = request
    yield Relay(lambda: stream(msgs, None, {**cfg, **grammar}, usage), through=reader)


__all__ = [
    "ConstrainedReply",
    "constrained_request",
    "constrained_stream",
    "has_calls",
    "routed_request",
]
