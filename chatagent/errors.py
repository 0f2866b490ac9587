"""Typed errors. Failures of the world raise these; mistakes of the model are fed back to it instead."""

from __future__ import annotations

from chatagent.keys import mask_secrets


class ChatAgentError(Exception):
    """Base of every error chatagent raises on purpose."""


class ModelServiceError(ChatAgentError):
    """The model service failed: `code` says how (an HTTP status or a short name), `message` what it said.

    `retryable` errors (timeouts, dropped connections, 429, 5xx) are retried by the model layer before
    they reach you; `retry_after` is the server's Retry-After in seconds when it sent one. The message
    never contains an API key (see `chatagent.keys`).
    """

    def __init__(
        self,
        code: str | int,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        partial: bool = False,
    ) -> None:
        self.code = code
        self.message = message = mask_secrets(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.partial = partial  # content had already been streamed when this happened
        super().__init__(f"{code}: {message}")

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
