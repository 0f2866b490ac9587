"""The error for a reply cut off by the token limit in the middle of a tool call (native or prompt-based)."""

from __future__ import annotations

from chatagent.errors import ModelErrorCode, ModelServiceError


def cut_call_error(partial: bool = False) -> ModelServiceError:
    """The error for a reply cut off by the token limit (finish_reason 'length') in the middle of a tool call:
    the call is never run (its arguments are incomplete), and the same request would be cut the same way."""
    return ModelServiceError(
        ModelErrorCode.LENGTH,
        "the reply was cut off by the token limit (finish_reason 'length') in the middle of a tool call, so the "
        "call was not run; raise max_tokens in generate_cfg",
        partial=partial,
    )
