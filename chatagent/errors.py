"""Typed errors. Failures of the world raise these; mistakes of the model are fed back to it instead.

`ModelServiceError.code` is the server's HTTP status (an int), the service's own code (DashScope's, e.g.
`'Throttling.RateQuota'`), or one of chatagent's own codes, all declared in `ModelErrorCode` (a str Enum, so
`e.code == 'timeout'` works too).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from chatagent.utils.keys import hide_endpoints, mask_secrets


class ModelErrorCode(str, Enum):
    """chatagent's own `ModelServiceError` codes (every code chatagent raises that is not the server's)."""

    TIMEOUT = "timeout"  # the server did not answer, or stopped sending, in time (retried)
    CONNECTION_ERROR = "connection_error"  # the connection failed or dropped (retried)
    REQUEST_ERROR = "request_error"  # the HTTP client failed otherwise (retried)
    BAD_RESPONSE = "bad_response"  # the answer was not the API's JSON or events
    EMPTY_RESPONSE = "empty_response"  # the answer had no choices (retried)
    STREAM_BROKEN = "stream_broken"  # the stream broke off in the middle (retried unless content was shown)
    STREAM_INCOMPLETE = "stream_incomplete"  # the stream ended without its end marker
    STREAM_ERROR = "stream_error"  # an error event in the stream with no code of its own
    CONTEXT_TOO_LONG = "context_too_long"  # the prompt does not fit the model's window, even cut down
    LENGTH = "length"  # the token limit cut the reply in the middle of a tool call (raise max_tokens)
    TOOLS_UNSUPPORTED = "tools_unsupported"  # the server rejects `tools` (the model then calls tools via the prompt)
    STREAM_OPTIONS_UNSUPPORTED = (
        "stream_options_unsupported"  # the server rejects `stream_options` (sent again without)
    )
    FILE_NOT_FOUND = "file_not_found"  # a media file given in a message does not exist
    UPLOAD_FAILED = "upload_failed"  # uploading a media file to DashScope failed
    MODEL_NOT_FOUND = "model_not_found"  # the local model's GGUF file is not there
    BAD_MODEL_FILE = "bad_model_file"  # the local model's file cannot be read or is not GGUF
    PORT_IN_USE = "port_in_use"  # the local model server's port is taken
    LOCAL_UNAVAILABLE = "local_unavailable"  # the local model's runtime (xllamacpp) is not installed
    LOCAL_SERVER_FAILED = "local_server_failed"  # the local model server did not start or does not answer

    def __str__(self) -> str:
        return self.value


class ChatAgentError(Exception):
    """Base of every error chatagent raises on purpose."""


class ModelServiceError(ChatAgentError):
    """The model service failed: `code` says how (an HTTP status, the service's code or a `ModelErrorCode`),
    `message` what it said.

    `retryable` errors (timeouts, dropped connections, 429, 5xx) are retried by the model layer before
    they reach you; `retry_after` is the server's Retry-After in seconds when it sent one. The message
    never contains an API key (see `chatagent.utils.keys`); a `hint` for the operator (which setting to check, for
    which server) ends it. `public_message` is what a client of a shared surface is told: the message without the
    hint, naming no model server. Qwen-Agent's forms work too: `ModelServiceError(e)`,
    `ModelServiceError(exception=e)`, `ModelServiceError(code='400', message='...', extra={...})`; without a code
    it is 'request_error'.
    """

    def __init__(
        self,
        code: ModelErrorCode | str | int | BaseException | None = None,
        message: str | None = None,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        partial: bool = False,
        exception: BaseException | None = None,
        extra: dict[str, Any] | None = None,
        hint: str | None = None,
    ) -> None:
        # Qwen-Agent's forms too: ModelServiceError(exception=e), ModelServiceError(e), (code=..., message=...)
        if isinstance(code, BaseException):
            code, exception = None, code
        self.exception = exception
        self.extra = extra
        if message is None:
            message = (
                f"{type(exception).__name__}: {exception}" if exception is not None else "the model service failed"
            )
        if code is None:
            code = ModelErrorCode.REQUEST_ERROR
        self.code = code
        self.hint = mask_secrets(hint) if hint else None
        self.message = message = mask_secrets(message) + (f" ({self.hint})" if self.hint else "")
        self.retryable = retryable
        self.retry_after = retry_after
        self.partial = partial  # content had already been streamed when this happened
        super().__init__(f"{code}: {message}")

    @property
    def public_message(self) -> str:
        """The message as a client of `chatagent serve` or the web UI reads it: no hint, no model server's URL or
        host (see `chatagent.utils.keys.hide_endpoints`)."""
        message = self.message
        if self.hint and message.endswith(f" ({self.hint})"):
            message = message[: -len(self.hint) - 3]
        return hide_endpoints(message)

    def scrubbed(self, secret: str | None) -> ModelServiceError:
        """This error with `secret` masked too (keys configured through chatagent are masked already)."""
        masked = mask_secrets(self.message, [secret])
        if masked != self.message:
            self.message = masked
            self.args = (f"{self.code}: {self.message}",)
        return self


class RunDeadlineExceeded(ChatAgentError):
    """A run went past the deadline its caller set."""


class MissingDependencyError(ChatAgentError, ImportError):
    """An optional package is not installed: the message names the extra of chatagent that installs it."""


class EmbedderError(ChatAgentError, RuntimeError):
    """An embedding service or model failed (the message says which and why, without keys)."""


class StructuredOutputError(ChatAgentError):
    """The model did not produce a valid answer within the retries; `text` is its last answer, `error` why."""

    def __init__(self, message: str, text: str, error: str) -> None:
        super().__init__(message)
        self.text = text
        self.error = error
