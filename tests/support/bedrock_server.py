"""A loopback Amazon Bedrock runtime for tests and benchmarks: Converse (`POST /model/{modelId}/converse`) and
ConverseStream (`/converse-stream`, the AWS event stream's binary framing) on 127.0.0.1, written from AWS's public
API reference and the SigV4 signing process.

    with BedrockServer() as server:                        # or the `bedrock_server` fixture (tests/llm/conftest.py)
        server.add(Reply(text='Hello!'))                   # the scripted replies: tests/support/provider_reply.py
        llm = get_chat_model({'model_type': 'bedrock', 'model': 'anthropic.claude-sonnet-4-5-20250929-v1:0',
                              'model_server': server.base_url, 'region': server.region})   # keys: server.credentials

Every request's SigV4 signature is verified with the server's own implementation of the process (the canonical
request with the path encoded again, the signed headers, the body's hash; the scope's region and service), and a
bad one gets 403 `InvalidSignatureException`, an unknown key 403 `UnrecognizedClientException`; a Bearer token
(a Bedrock API key) is taken when `server.bearer` is set. What Converse checks is checked, answered 400
`ValidationException`: unknown fields, `messages` starting with the user and alternating, known block types, no
blank text, every `toolUse` answered by a `toolResult` in the next message, `toolConfig` present when blocks use
tools, at most 4 `cachePoint`s, reasoning sent back with the server's signature. The prompt cache is simulated at
the `cachePoint`s (tools, then system, then messages) as Anthropic's (see anthropic_server.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import struct
import time
import zlib
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from tests.support.loopback import LoopbackHandler, LoopbackServer, Request
from tests.support.provider_reply import Reply, tokens

TOP_LEVEL = {
    "messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig", "additionalModelRequestFields",
    "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig",
}  # fmt: skip
BLOCKS = {"text", "image", "document", "video", "toolUse", "toolResult", "guardContent", "cachePoint",
          "reasoningContent", "citationsContent"}  # fmt: skip
INFERENCE = {"maxTokens", "temperature", "topP", "stopSequences"}
PATH = re.compile(r"^/model/([^/]+)/(converse|converse-stream)$")
_SECRET = b"loopback-bedrock-reasoning"


def reasoning_signature(text: str) -> str:
    return base64.b64encode(hmac.new(_SECRET, text.encode(), hashlib.sha256).digest()).decode()


class Refused(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "ValidationException") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify_sigv4(method: str, raw_path: str, headers: dict[str, str], body: bytes, secrets: dict[str, str],
                 region: str, token: str | None) -> None:  # fmt: skip
    """Raise Refused unless `headers` carry a valid SigV4 signature of this request for service 'bedrock'."""
    auth = headers.get("authorization", "")
    match = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)  # fmt: skip
    if match is None:
        raise Refused("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'.", 403,
                      "IncompleteSignatureException")  # fmt: skip
    key_id, day, scope_region, service, signed, signature = match.groups()
    if key_id not in secrets:
        raise Refused("The security token included in the request is invalid.", 403, "UnrecognizedClientException")
    if (scope_region, service) != (region, "bedrock"):
        raise Refused(f"Credential should be scoped to a valid region and service 'bedrock' ({scope_region}/{service})",
                      403, "InvalidSignatureException")  # fmt: skip
    if token is not None and headers.get("x-amz-security-token") != token:
        raise Refused("The security token included in the request is invalid.", 403, "UnrecognizedClientException")
    amz_date = headers.get("x-amz-date", "")
    names = signed.split(";")
    if "host" not in names or any(n not in headers for n in names) or not amz_date.startswith(day):
        raise Refused("The request signature we calculated does not match the signature you provided.", 403,
                      "InvalidSignatureException")  # fmt: skip
    split = urlsplit(raw_path)
    query = "&".join(sorted(
        f"{quote(unquote(k), safe='-_.~')}={quote(unquote(v), safe='-_.~')}"
        for k, _, v in (p.partition("=") for p in split.query.split("&") if p)
    ))  # fmt: skip
    canonical_headers = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
    payload = headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    canonical = "\n".join([method, quote(split.path, safe="/~"), query, canonical_headers, signed, payload])
    scope = f"{day}/{region}/bedrock/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secrets[key_id]}".encode(), day), region), "bedrock"), "aws4_request")
    if not hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), signature):
        raise Refused("The request signature we calculated does not match the signature you provided. Check your "
                      "AWS Secret Access Key and signing method.", 403, "InvalidSignatureException")  # fmt: skip


def check(body: Any) -> None:
    """Raise Refused as Converse would for this body."""
    if not isinstance(body, dict):
        raise Refused("Malformed input request, please reformat your input and try again.")
    for key in body:
        if key not in TOP_LEVEL:
            raise Refused(f"Malformed input request: extraneous key [{key}] is not permitted, please reformat your "
                          "input and try again.")  # fmt: skip
    messages = body.get("messages")
    if not messages:
        raise Refused("A conversation must start with a user message. Try again with a conversation that starts "
                      "with a user message.")  # fmt: skip
    for key in body.get("inferenceConfig") or {}:
        if key not in INFERENCE:
            raise Refused(f"Malformed input request: extraneous key [{key}] is not permitted")
    uses_tools = False
    points = sum("cachePoint" in b for b in body.get("system") or [])
    points += sum("cachePoint" in t for t in (body.get("toolConfig") or {}).get("tools") or [])
    open_calls: list[str] = []
    for n, msg in enumerate(messages):
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise Refused(f"1 validation error detected: Value '{role}' at 'messages.{n + 1}.member.role' failed to "
                          "satisfy constraint: Member must satisfy enum value set: [user, assistant]")  # fmt: skip
        if n == 0 and role != "user":
            raise Refused("A conversation must start with a user message.")
        if n and messages[n - 1].get("role") == role:
            raise Refused("A conversation must alternate between user and assistant roles. Make sure the "
                          "conversation alternates between user and assistant roles and try again.")  # fmt: skip
        blocks = msg.get("content") or []
        if not blocks:
            raise Refused(f"The content field in the Message object at messages.{n}.content is empty.")
        results = [b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b]
        if sorted(results) != sorted(open_calls):
            if open_calls:
                raise Refused(f"Expected toolResult blocks at messages.{n}.content for the following Ids: "
                              f"{', '.join(sorted(set(open_calls) - set(results)) or open_calls)}")  # fmt: skip
            raise Refused(f"The number of toolResult blocks at messages.{n}.content exceeds the number of toolUse "
                          "blocks of previous turn.")  # fmt: skip
        open_calls = []
        for i, block in enumerate(blocks):
            kinds = [k for k in block if k in BLOCKS]
            if len(kinds) != 1 or len(block) != 1:
                raise Refused(f"messages.{n}.content.{i}: a content block holds exactly one member")
            kind = kinds[0]
            if kind == "text" and not block["text"].strip():
                raise Refused(f"The text field in the ContentBlock object at messages.{n}.content.{i} is blank. Add "
                              "text to the text field, and try again.")  # fmt: skip
            if kind == "toolUse":
                open_calls.append(block["toolUse"]["toolUseId"])
            if kind in ("toolUse", "toolResult"):
                uses_tools = True
            if kind == "reasoningContent":
                text = block["reasoningContent"].get("reasoningText")
                if text is not None and text.get("signature") != reasoning_signature(text.get("text", "")):
                    raise Refused(f"messages.{n}.content.{i}: the reasoning block's signature is not valid")
            points += kind == "cachePoint"
    if uses_tools and not body.get("toolConfig"):
        raise Refused("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
    if points > 4:
        raise Refused(f"The number of cachePoint blocks ({points}) exceeds the maximum of 4.")


class BedrockServer(LoopbackServer):
    """The server; `start()` it (the fixture does), `add()` replies, read `requests`."""

    reply_type = Reply
    thread_name = "bedrock-server"
    poll_interval = 0.05
    region = "us-west-2"

    def __init__(self) -> None:
        super().__init__()
        self.credentials = {"AKIALOOPBACKKEY00001": "loopback/secret/access/key+0123456789abcd"}
        self.session_token: str | None = None
        self.bearer: str | None = None  # a Bedrock API key the server takes as a Bearer token
        self.cache: dict[str, int] = {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_key(self) -> tuple[str, str]:
        return next(iter(self.credentials.items()))

    def reset(self) -> None:
        super().reset()
        self.cache.clear()
        self.session_token = self.bearer = None

    def _no_reply(self) -> Reply:
        return Reply(status=400, error="loopback server: no scripted reply left")

    def usage(self, body: dict, output: int) -> dict:
        """inputTokens, cacheRead/WriteInputTokens as the cache at the cachePoints makes them."""
        segments: list[tuple[Any, bool]] = []
        for tool in (body.get("toolConfig") or {}).get("tools") or []:
            segments.append(("tool", tool) if "cachePoint" not in tool else (None, True))
        for block in body.get("system") or []:
            segments.append(("system", block) if "cachePoint" not in block else (None, True))
        for msg in body["messages"]:
            for block in msg["content"]:
                segments.append((msg["role"], block) if "cachePoint" not in block else (None, True))
        total, prefix, marks = 0, hashlib.sha256(), []
        for segment in segments:
            if segment[1] is True:
                marks.append((prefix.hexdigest(), total))
                continue
            total += tokens(segment)
            prefix.update(json.dumps(segment, sort_keys=True).encode())
        read = max((n for h, n in marks if h in self.cache), default=0)
        write = 0
        for h, n in marks:
            if n > read and h not in self.cache:
                self.cache[h] = n
                write = n - read
        return {"inputTokens": total - read - write, "outputTokens": output, "totalTokens": total + output,
                "cacheReadInputTokens": read, "cacheWriteInputTokens": write}  # fmt: skip


class _Handler(LoopbackHandler):
    owner: BedrockServer

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
        match = PATH.match(urlsplit(self.path).path)
        if match is None:
            self._error(404, "UnknownOperationException", f"no operation at {self.path}")
            return
        owner = self.owner
        try:
            if owner.bearer is not None and headers.get("authorization") == f"Bearer {owner.bearer}":
                pass
            else:
                verify_sigv4("POST", self.path, headers, raw, owner.credentials, owner.region, owner.session_token)
            check(body)
        except Refused as e:
            owner.requests.append(req)
            self._error(e.status, e.kind, str(e))
            req.outcome = "refused"
            req.done.set()
            return
        reply = owner._next_reply(req, record=True)
        self._finish(req, lambda: self._answer(body, unquote(match.group(1)), reply, match.group(2) != "converse"))

    def _error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(
            status,
            {"message": message},
            {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/", **(headers or {})},
        )

    def _answer(self, body: dict, model: str, reply: Reply, stream: bool) -> str:
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            kind = reply.error_type or {429: "ThrottlingException", 500: "InternalServerException",
                                        503: "ServiceUnavailableException", 403: "AccessDeniedException",
                                        }.get(reply.status, "ValidationException")  # fmt: skip
            self._error(reply.status, kind, reply.error or f"scripted error {reply.status}", reply.headers)
            return "complete"
        blocks = _blocks(reply)
        usage = reply.usage or self.owner.usage(body, sum(tokens(b) for b in blocks))
        stop = reply.stop or ("tool_use" if reply.tool_calls else "end_turn")
        if not stream:
            out = {"output": {"message": {"role": "assistant", "content": blocks}}, "stopReason": stop,
                   "usage": usage, "metrics": {"latencyMs": 1}}  # fmt: skip
            self._send_json(200, out, reply.headers)
            return "complete"
        self._send_head(200, {"Content-Type": "application/vnd.amazon.eventstream"}, {"Transfer-Encoding": "chunked"},
                        {"x-amzn-RequestId": "loopback"}, reply.headers)  # fmt: skip
        events = list(_events(reply, usage, stop))
        if not (reply.interval or reply.drop_after is not None or reply.end_after is not None
                or reply.error_after is not None):  # fmt: skip
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
                kind = reply.error_type or "throttlingException"
                headers = {":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"}
                self._write_chunk(
                    encode_message(headers, json.dumps({"message": reply.error or "Too many requests"}).encode())
                )
                break
            self._write_chunk(event)
        self._write_chunk(b"")
        return "complete"


BedrockServer.handler = _Handler


def _blocks(reply: Reply) -> list[dict]:
    out: list[dict] = []
    if reply.thinking:
        out.append({"reasoningContent": {"reasoningText": {"text": reply.thinking,
                                                           "signature": reasoning_signature(reply.thinking)}}})  # fmt: skip
    if reply.full_text():
        out.append({"text": reply.full_text()})
    for cid, name, args in reply.call_objects():
        out.append({"toolUse": {"toolUseId": cid.replace("call_", "tooluse_"), "name": name, "input": args}})
    return out


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers (type 7): prelude (total length, headers length, their CRC32),
    headers, payload, the message's CRC32."""
    head = b"".join(
        bytes([len(k.encode())]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _event(kind: str, obj: dict) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(obj, ensure_ascii=False).encode())


def _events(reply: Reply, usage: dict, stop: str):
    yield _event("messageStart", {"role": "assistant", "p": "abcd"})
    index = 0
    n = reply.chunk_size
    if reply.thinking:
        for i in range(0, len(reply.thinking), n):
            yield _event("contentBlockDelta", {"contentBlockIndex": index,
                                               "delta": {"reasoningContent": {"text": reply.thinking[i : i + n]}}})  # fmt: skip
        yield _event("contentBlockDelta", {"contentBlockIndex": index,
                                           "delta": {"reasoningContent": {"signature": reasoning_signature(reply.thinking)}}})  # fmt: skip
        yield _event("contentBlockStop", {"contentBlockIndex": index})
        index += 1
    if reply.full_text():
        for piece in reply.text_chunks():
            yield _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}})
        yield _event("contentBlockStop", {"contentBlockIndex": index})
        index += 1
    for cid, name, args in reply.calls():
        start = {"toolUse": {"toolUseId": cid.replace("call_", "tooluse_"), "name": name}}
        yield _event("contentBlockStart", {"contentBlockIndex": index, "start": start})
        for piece in reply.argument_chunks(args):
            yield _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
        yield _event("contentBlockStop", {"contentBlockIndex": index})
        index += 1
    yield _event("messageStop", {"stopReason": stop})
    yield _event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}})
