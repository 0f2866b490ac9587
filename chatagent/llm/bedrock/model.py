"""BedrockModel: models on Amazon Bedrock through the Converse and ConverseStream APIs, spoken natively over httpx,
each request signed with SigV4 (botocore's signer and credential chain: the `bedrock` extra).

    llm = get_chat_model({'model_type': 'bedrock', 'model': 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'})

The region and the credentials come from the usual AWS environment: `region` (else `AWS_REGION`,
`AWS_DEFAULT_REGION`, or the profile's), `profile` (else `AWS_PROFILE`), and botocore's chain for the keys
(`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, `~/.aws/credentials`, SSO, a container's or an
instance's role), refreshed when they expire. A Bedrock API key (`api_key`, else `AWS_BEARER_TOKEN_BEDROCK`) is
sent as a Bearer token instead, with no signing. `model_server`: the base URL (default botocore's
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` or `AWS_ENDPOINT_URL`, else `https://bedrock-runtime.{region}.amazonaws.com`; a VPC endpoint or a loopback server can stand in). No key or
token appears in an error or a log line.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import quote

from chatagent.errors import ModelServiceError
from chatagent.llm.bedrock.reply import ConverseReader, whole_converse
from chatagent.llm.bedrock.request import caches_prompts, request_body
from chatagent.llm.http_backend import HTTPCall, HTTPModel, Prompt, StreamReader, json_body, server_url
from chatagent.llm.registry import register_llm
from chatagent.llm.request import Usage
from chatagent.llm.request_options import request_options
from chatagent.llm.settings import ToolChoice
from chatagent.schema import Message
from chatagent.utils.extras import missing_dependency
from chatagent.utils.keys import clean_api_key, mask_secrets

STREAM_TYPE = "application/vnd.amazon.eventstream"


@register_llm("bedrock")
class BedrockModel(HTTPModel):
    """A model on Amazon Bedrock (see the module docstring for the config)."""

    provider = "Bedrock"
    stream_type = STREAM_TYPE
    key_hint = "the AWS credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...) or AWS_BEARER_TOKEN_BEDROCK"
    cfg_keys = frozenset({"region", "profile"})

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        cfg = self.cfg
        self.api_key = clean_api_key(cfg.get("api_key") or os.environ.get("AWS_BEARER_TOKEN_BEDROCK"))
        self.profile: str | None = cfg.get("profile") or os.environ.get("AWS_PROFILE") or None
        self._session: Any = None
        self._session_lock = threading.Lock()
        region = cfg.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region and not self.api_key:
            region = self.session.get_config_variable("region")
        self.region: str = str(region or "us-east-1")
        default = (
            os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
            or os.environ.get("AWS_ENDPOINT_URL")
            or (f"https://bedrock-runtime.{self.region}.amazonaws.com")
        )
        self.base_url = server_url(cfg.get("model_server"), ("bedrock",), default)
        self._secrets: list[str | None] = [self.api_key]

    def __repr__(self) -> str:
        return f"BedrockModel(model={self.model!r}, region={self.region!r})"

    @property
    def session(self) -> Any:
        """botocore's session (its credential chain), made on first use."""
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    try:
                        import botocore.session  # pyright: ignore[reportMissingTypeStubs]  (the bedrock extra's)
                    except ModuleNotFoundError as e:
                        raise missing_dependency(e, "Bedrock's SigV4 signing") from None
                    self._session = botocore.session.Session(profile=self.profile)
        return self._session

    def build_call(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
        stream: bool,
    ) -> HTTPCall:
        opts = request_options(cfg, tool_choice)
        cache = cfg.get("prompt_cache", caches_prompts(self.model)) is not False
        body, response_tool = request_body(self.model, messages, functions, opts, cache)
        url = f"{self.base_url}/model/{quote(self.model, safe='')}/{'converse-stream' if stream else 'converse'}"
        headers = {"Content-Type": "application/json", "Accept": STREAM_TYPE if stream else "application/json"}
        headers.update(opts.extra_headers)
        return HTTPCall(url, headers, json_body(body), opts.timeout, stream, bool(functions), response_tool)

    def sign(self, call: HTTPCall) -> None:
        """A Bearer token when an API key is set, else SigV4 with the current credentials."""
        if self.api_key:
            call.headers["Authorization"] = f"Bearer {self.api_key}"
            return
        from botocore.auth import SigV4Auth  # pyright: ignore[reportMissingTypeStubs]  (the session made sure of it)
        from botocore.awsrequest import AWSRequest  # pyright: ignore[reportMissingTypeStubs]  (the same package)

        credentials = self.session.get_credentials()
        if credentials is None:
            raise ModelServiceError(
                401, f"no AWS credentials for Bedrock (set them as botocore finds them: {self.key_hint})"
            )
        frozen = credentials.get_frozen_credentials()
        self._secrets = [frozen.access_key, frozen.secret_key, frozen.token]
        request = AWSRequest(method="POST", url=call.url, data=call.body, headers=dict(call.headers))
        SigV4Auth(frozen, "bedrock", self.region).add_auth(request)  # pyright: ignore[reportUnknownMemberType]
        call.headers = dict(request.headers.items())

    def status_error(self, status: int, headers: Any, body: bytes, has_tools: bool) -> ModelServiceError:
        error = super().status_error(status, headers, body, has_tools)
        kind = (headers.get("x-amzn-errortype") or "").split(":", 1)[0] if headers else ""
        if kind and kind not in error.message:
            error.message = f"{kind}: {error.message}"
        error.message = mask_secrets(error.message, self._secrets)
        error.args = (f"{error.code}: {error.message}",)
        return error

    def stream_reader(self, call: HTTPCall, prompt: Prompt) -> StreamReader:
        return ConverseReader(self, prompt, call.context)

    def whole_reply(self, call: HTTPCall, body: bytes, usage: Usage | None, prompt: Prompt) -> list[Message]:
        return whole_converse(self, body, usage, prompt, call.context)


__all__ = ["BedrockModel"]
