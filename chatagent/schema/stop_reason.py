"""Why an answer stopped where it did: `StopReason`, the value of a message's `extra['stop_reason']`."""

from __future__ import annotations

from enum import Enum

__all__ = ["StopReason"]


class StopReason(str, Enum):
    """Why an answer ended other than by the model finishing it, in `extra['stop_reason']` of its last message.

    A `str`: it compares equal to its value (`extra['stop_reason'] == 'length'` holds) and is stored, sent and
    printed as it (`str(StopReason.LENGTH) == 'length'`); messages read back from a store carry the plain string.

    - `length`: the reply reached the model's token limit (`max_tokens`) and was cut off
    - `max_llm_calls`: the agent's loop used all its model calls (`max_llm_calls`)
    - `return_direct`: a `return_direct` tool's result is the answer
    - `repetition`: the embedded model began to repeat itself: its answer was ended there
    - `prompt_echo`: the embedded model recited its system message: that part was taken back
    """

    LENGTH = "length"
    MAX_LLM_CALLS = "max_llm_calls"
    RETURN_DIRECT = "return_direct"
    REPETITION = "repetition"
    PROMPT_ECHO = "prompt_echo"

    def __str__(self) -> str:
        return self.value
