"""Model backends written for Qwen-Agent: `_chat_stream(messages, delta_stream, generate_cfg)` and
`_chat_no_stream(messages, generate_cfg)`, as Qwen-Agent's `BaseChatModel` asks of a subclass.

`adapt(cls)` (called for every subclass of `chatagent.llm.base.BaseChatModel`) notices those signatures (a
`delta_stream` parameter, or a `_chat_no_stream`) and puts chatagent's backend methods in front of them:
`_chat_stream(messages, functions, cfg, usage)` asks the Qwen-style stream for whole lists (each the reply so far)
and turns them into fragments (`WholeLists`); `_chat_once` calls `_chat_no_stream`. Such a backend takes no tools
of its own (`native_tools = False`): functions reach the model through the prompt and its calls are parsed back,
as Qwen-Agent's `BaseFnCallModel` does. What the backend gets in `generate_cfg` is the request's own keys (no
`request_timeout`: chatagent's deadline is not theirs to apply).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from chatagent.schema import Message, to_message
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import WholeLists

QWEN_STREAM = "_qwen_chat_stream"
QWEN_ONCE = "_qwen_chat_no_stream"


def _takes(method: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def adapt(cls: Any) -> None:
    """Make a backend class (a BaseChatModel subclass) with Qwen-Agent's `_chat_stream`/`_chat_no_stream` serve
    chatagent's calls."""
    stream: Any = cls.__dict__.get("_chat_stream")
    once: Any = cls.__dict__.get("_chat_no_stream")
    if stream is not None and _takes(stream, "delta_stream"):
        setattr(cls, QWEN_STREAM, stream)
        cls._chat_stream = _chat_stream
        cls.native_tools = False
    if once is not None:
        setattr(cls, QWEN_ONCE, once)
        cls._chat_once = _chat_once
        cls.native_tools = False


def _backend_cfg(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if k != "request_timeout"}


def _chat_stream(
    self: Any, messages: list[Message], functions: Any, cfg: dict[str, Any], usage: Any, **choice: Any
) -> Iterator[list[Fragment]]:
    """chatagent's `_chat_stream` over a Qwen-style one (tools, if any, are in the prompt already)."""
    whole = WholeLists()
    lists: Iterable[list[Any]] = getattr(self, QWEN_STREAM)(
        messages, delta_stream=False, generate_cfg=_backend_cfg(cfg)
    )
    for reply in lists:
        out = whole.fragments([_assistant(m) for m in reply])
        if out:
            yield out


def _chat_once(
    self: Any, messages: list[Message], functions: Any, cfg: dict[str, Any], usage: Any, **choice: Any
) -> list[Message]:
    """chatagent's `_chat_once` over a Qwen-style `_chat_no_stream`."""
    reply = getattr(self, QWEN_ONCE)(messages, generate_cfg=_backend_cfg(cfg))
    return [_assistant(m) for m in reply]


def _assistant(m: Message | dict[str, Any]) -> Message:
    msg = m if isinstance(m, Message) else to_message(m)
    if msg.role != "assistant":
        raise TypeError(f"a model backend's reply must hold assistant messages, got one with role {msg.role!r}")
    return msg


__all__ = ["adapt"]
