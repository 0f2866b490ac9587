"""A loopback Gemini API for tests and benchmarks, written from Google's public API reference: the Generative
Language API (`POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`, key in
`x-goog-api-key` or `?key=`) and Vertex AI's paths (`/v1/projects/{p}/locations/{l}/publishers/google/models/...`,
a Bearer token), on 127.0.0.1.

    with GeminiServer() as server:                         # or the `gemini_server` fixture (tests/llm/conftest.py)
        server.add(Reply(text='Hello!'))                   # the scripted replies: tests/support/provider_reply.py
        llm = get_chat_model({'model_type': 'gemini', 'model': 'gemini-2.5-flash',
                              'model_server': server.base_url, 'api_key': server.api_key})

What the API checks is checked, and answered as it answers (400 `INVALID_ARGUMENT`, 403 `PERMISSION_DENIED` for a
bad key, 404 `NOT_FOUND` for an unknown path): unknown fields (`Unknown name "x"`); `contents` and each part's one
data field; roles `user` and `model`; a function response turn right after a function call turn, with as many
responses as calls; schema type names; a `thinkingBudget` in range; and, as Gemini 3 does, the thought signature of
each function call of the current turn sent back on its part. `Reply(thinking=...)` is a thought part (with
`includeThoughts`); function calls are signed by the server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import LoopbackHandler, LoopbackServer, Request
from tests.support.provider_reply import Reply, tokens

TOP_LEVEL = {
    "contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent",
    "labels",
}  # fmt: skip
GENERATION = {
    "temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences", "seed", "presencePenalty",
    "frequencyPenalty", "responseMimeType", "responseSchema", "responseJsonSchema", "thinkingConfig",
    "responseModalities", "responseLogprobs", "logprobs", "mediaResolution",
}  # fmt: skip
DATA_FIELDS = {"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
               "codeExecutionResult"}  # fmt: skip
PART_FIELDS = DATA_FIELDS | {"thought", "thoughtSignature", "videoMetadata"}
TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL", "TYPE_UNSPECIFIED"}
PATH = re.compile(
    r"^/(?:v1beta|v1)/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?models/([^/:]+):(generateContent|streamGenerateContent)$"
)


def call_signature(name: str, args: Any) -> str:
    """The server's thought signature of a function call."""
    digest = hashlib.sha256(f"{name}:{json.dumps(args, sort_keys=True)}".encode()).digest()
    return base64.b64encode(digest).decode()


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, state: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.status, self.state = status, state


def _schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        raise BadRequest(f"Invalid value at '{where}': not an object")
    kind = schema.get("type")
    if kind is not None and str(kind).upper() not in TYPES:
        raise BadRequest(f"Invalid value at '{where}.type' ({kind}), Invalid enum value")
    for key in ("$ref", "$defs", "additionalProperties"):
        if key in schema:
            raise BadRequest(f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': Cannot find field.")
    for name, sub in (schema.get("properties") or {}).items():
        _schema(sub, f"{where}.properties[{name}]")
    if "items" in schema:
        _schema(schema["items"], f"{where}.items")


def check(body: Any) -> None:
    """Raise BadRequest as the API would for this request body."""
    if not isinstance(body, dict):
        raise BadRequest("Invalid JSON payload received.")
    for key in body:
        if key not in TOP_LEVEL:
            raise BadRequest(f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
    contents = body.get("contents")
    if not contents:
        raise BadRequest("* GenerateContentRequest.contents: contents is not specified")
    calls_before: list[dict] = []
    last_model = max((n for n, c in enumerate(contents) if c.get("role") == "model"), default=-1)
    for n, content in enumerate(contents):
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise BadRequest(f"Please use a valid role: user, model. (contents[{n}].role: {role})")
        parts = content.get("parts")
        if not parts:
            raise BadRequest(f"* GenerateContentRequest.contents[{n}].parts: contents.parts must not be empty.")
        responses = []
        for i, part in enumerate(parts):
            unknown = set(part) - PART_FIELDS
            if unknown:
                raise BadRequest(f'Invalid JSON payload received. Unknown name "{sorted(unknown)[0]}" at '
                                 f"'contents[{n}].parts[{i}]': Cannot find field.")  # fmt: skip
            data = [k for k in part if k in DATA_FIELDS]
            if len(data) != 1:
                raise BadRequest(f"contents[{n}].parts[{i}]: a part holds exactly one of text, inlineData, ...")
            if "functionResponse" in part:
                responses.append(part["functionResponse"])
            if (
                "functionCall" in part
                and n == last_model
                and part.get("thoughtSignature")
                != call_signature(part["functionCall"].get("name"), part["functionCall"].get("args") or {})
            ):
                raise BadRequest(f"Function call is missing a thought_signature in functionCall parts. This is "
                                 f"required for tools to work correctly (contents[{n}].parts[{i}])")  # fmt: skip
        if responses:
            if not calls_before:
                raise BadRequest(
                    "Please ensure that function response turn comes immediately after a function call turn."
                )
            if len(responses) != len(calls_before):
                raise BadRequest("Please ensure that the number of function response parts is equal to the number of "
                                 "function call parts of the function call turn.")  # fmt: skip
            if sorted(r.get("name") for r in responses) != sorted(c.get("name") for c in calls_before):
                raise BadRequest("Please ensure that function responses name the function calls of the turn before.")
        calls_before = [p["functionCall"] for p in parts if "functionCall" in p] if role == "model" else []
    for t, tool in enumerate(body.get("tools") or []):
        for d, decl in enumerate(tool.get("functionDeclarations") or []):
            if not decl.get("name"):
                raise BadRequest(f"* GenerateContentRequest.tools[{t}].function_declarations[{d}].name: is empty")
            if "parameters" in decl:
                _schema(decl["parameters"], f"tools[{t}].function_declarations[{d}].parameters")
    generation = body.get("generationConfig") or {}
    for key in generation:
        if key not in GENERATION:
            raise BadRequest(
                f"Invalid JSON payload received. Unknown name \"{key}\" at 'generation_config': Cannot find field."
            )
    if "responseSchema" in generation:
        _schema(generation["responseSchema"], "generation_config.response_schema")
    budget = (generation.get("thinkingConfig") or {}).get("thinkingBudget")
    if budget is not None and not (-1 <= budget <= 32768):
        raise BadRequest("The thinking budget is out of range: it must be -1 (dynamic), 0 or up to 32768.")
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    if mode is not None and mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
        raise BadRequest(f"Invalid value at 'tool_config.function_calling_config.mode' ({mode})")


class GeminiServer(LoopbackServer):
    """The server; `start()` it (the fixture does), `add()` replies, read `requests`."""

    reply_type = Reply
    thread_name = "gemini-server"
    poll_interval = 0.05

    def __init__(self, api_key: str | None = "AIza-loopback-key") -> None:
        super().__init__()
        self.api_key = api_key
        self.cached_tokens = 0  # what usageMetadata.cachedContentTokenCount says (a request naming a cachedContent)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def vertex_url(self, project: str = "p", location: str = "us-central1") -> str:
        return f"{self.base_url}/v1/projects/{project}/locations/{location}/publishers/google"

    def _no_reply(self) -> Reply:
        return Reply(status=400, error="loopback server: no scripted reply left")


class _Handler(LoopbackHandler):
    owner: GeminiServer

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:
            pass

    def do_POST(self) -> None:
        raw, headers = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        req = Request(self.command, self.path, headers, body, self.client_address[:2])
        split = urlsplit(self.path)
        match = PATH.match(split.path)
        if match is None:
            self._error(404, "NOT_FOUND", f"Requested entity was not found ({split.path}).")
            return
        query = parse_qs(split.query)
        key = headers.get("x-goog-api-key") or (query.get("key") or [""])[0]
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        try:
            if self.owner.api_key is not None and self.owner.api_key not in (key, bearer):
                raise BadRequest("API key not valid. Please pass a valid API key.", 403, "PERMISSION_DENIED")
            check(body)
        except BadRequest as e:
            self.owner.requests.append(req)
            self._error(e.status, e.state, str(e))
            req.outcome = "refused"
            req.done.set()
            return
        stream = match.group(2) == "streamGenerateContent"
        reply = self.owner._next_reply(req, record=True)
        self._finish(req, lambda: self._answer(body, match.group(1), reply, stream, query.get("alt") == ["sse"]))

    def _error(self, status: int, state: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(status, {"error": {"code": status, "message": message, "status": state}}, headers)

    def _answer(self, body: dict, model: str, reply: Reply, stream: bool, sse: bool) -> str:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            state = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}.get(
                reply.status, "INVALID_ARGUMENT"
            )
            self._error(reply.status, state, reply.error or f"scripted error {reply.status}", reply.headers)
            return "complete"
        chunks = _chunks(body, model, reply, self.owner.cached_tokens if body.get("cachedContent") else 0)
        if not stream:
            whole = _merged(chunks)
            self._send_json(200, whole, reply.headers)
            return "complete"
        ctype = "text/event-stream" if sse else "application/json"
        self._send_head(200, {"Content-Type": ctype}, {"Transfer-Encoding": "chunked"}, reply.headers)
        if not sse:  # without alt=sse: one JSON array of the chunks
            self._write_chunk(json.dumps(chunks).encode())
            self._write_chunk(b"")
            return "complete"
        events = [b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\r\n\r\n" for c in chunks]
        if not (
            reply.interval
            or reply.drop_after is not None
            or reply.end_after is not None
            or reply.error_after is not None
        ):
            self._write_chunk(b"".join(events))
            self._write_chunk(b"")
            return "complete"
        for sent, event in enumerate(events):
            if sent and reply.interval:
                time.sleep(reply.interval)
            if reply.drop_after is not None and sent >= reply.drop_after:
                return self._drop()
            if reply.end_after is not None and sent >= reply.end_after:
                break
            if reply.error_after is not None and sent == reply.error_after:
                error = {
                    "error": {
                        "code": 503,
                        "message": reply.error or "The model is overloaded.",
                        "status": "UNAVAILABLE",
                    }
                }
                self._write_chunk(b"data: " + json.dumps(error).encode() + b"\r\n\r\n")
                break
            self._write_chunk(event)
        self._write_chunk(b"")
        return "complete"


GeminiServer.handler = _Handler


def _chunks(body: dict, model: str, reply: Reply, cached: int) -> list[dict]:
    include = ((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("includeThoughts")
    parts: list[list[dict]] = []
    n = reply.chunk_size
    if reply.thinking and include:
        parts += [[{"text": reply.thinking[i : i + n], "thought": True}] for i in range(0, len(reply.thinking), n)]
    parts += [[{"text": piece}] for piece in reply.text_chunks()]
    calls = [{"functionCall": {"name": name, "args": args}, "thoughtSignature": call_signature(name, args)}
             for _, name, args in reply.call_objects()]  # fmt: skip
    if calls:
        parts.append(calls)
    prompt = (
        tokens(body.get("contents")) + tokens(body.get("systemInstruction") or "") + tokens(body.get("tools") or "")
    )
    output = sum(tokens(p) for group in parts for p in group)
    usage = reply.usage or {
        "promptTokenCount": prompt + cached, "candidatesTokenCount": output,
        "totalTokenCount": prompt + cached + output, **({"cachedContentTokenCount": cached} if cached else {}),
        **({"thoughtsTokenCount": tokens(reply.thinking)} if reply.thinking else {}),
    }  # fmt: skip
    finish = reply.stop or "STOP"
    chunks = [
        {
            "candidates": [{"content": {"role": "model", "parts": group}, "index": 0}],
            "modelVersion": model,
            "responseId": "loopback",
        }
        for group in parts
    ] or [  # fmt: skip
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "index": 0}], "modelVersion": model}
    ]
    chunks[-1]["candidates"][0]["finishReason"] = finish
    chunks[-1]["usageMetadata"] = usage
    return chunks


def _merged(chunks: list[dict]) -> dict:
    """The chunks of a stream as one whole response (texts of consecutive text parts joined)."""
    parts: list[dict] = []
    for c in chunks:
        for p in c["candidates"][0]["content"]["parts"]:
            if parts and "text" in p and "text" in parts[-1] and p.get("thought") == parts[-1].get("thought"):
                parts[-1] = {**parts[-1], "text": parts[-1]["text"] + p["text"]}
            else:
                parts.append(dict(p))
    last = chunks[-1]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": last["candidates"][0]["finishReason"],
                 "index": 0}  # fmt: skip
    return {"candidates": [candidate], "usageMetadata": last["usageMetadata"], "modelVersion": last.get("modelVersion")}
