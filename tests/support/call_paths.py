"""Ask a model the same question the four ways a backend can be reached: chat() streamed and whole, achat()
streamed and whole (each a different backend method: _chat_stream, _chat_once, _achat_stream, _achat_once)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from chatagent.llm.base import BaseChatModel
from chatagent.schema import Message

PATHS = ("chat stream", "chat once", "achat stream", "achat once")
TOOL_FIELDS = ("tool_choice", "parallel_tool_calls")  # the request fields that say how tools may be called
DEADLINE = 20  # seconds the async calls may take in all


def ask_every_path(
    llm: BaseChatModel,
    messages: list[Message],
    functions: list[dict[str, Any]] | None = None,
    extra_generate_cfg: dict[str, Any] | None = None,
    path: str | None = None,
) -> list[list[Message]]:
    """The replies to `messages` by each path of PATHS in order (only `path`'s when given)."""
    paths = PATHS if path is None else (path,)
    if not set(paths) <= set(PATHS):
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    replies: list[list[Message]] = []
    for way in paths:
        if way == "chat stream":
            replies.append(list(llm.chat(messages, functions, extra_generate_cfg=extra_generate_cfg))[-1])
        elif way == "chat once":
            replies.append(llm.chat(messages, functions, stream=False, extra_generate_cfg=extra_generate_cfg))
        else:
            replies.append(
                asyncio.run(asyncio.wait_for(_aask(llm, messages, functions, extra_generate_cfg, way), DEADLINE))
            )
    return replies


async def _aask(
    llm: BaseChatModel,
    messages: list[Message],
    functions: list[dict[str, Any]] | None,
    extra_generate_cfg: dict[str, Any] | None,
    way: str,
) -> list[Message]:
    if way == "achat once":
        return await llm.achat(messages, functions, stream=False, extra_generate_cfg=extra_generate_cfg)
    last: list[Message] = []
    async for rsp in llm.achat(messages, functions, extra_generate_cfg=extra_generate_cfg):
        last = rsp
    return last


def tool_fields_by_path(
    llm: BaseChatModel,
    messages: list[Message],
    functions: list[dict[str, Any]],
    received: Callable[[], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Ask `llm` by every path with `functions`, then once without; the TOOL_FIELDS of each path's request, as
    `received()` lists the fields of the requests the server got. Fails if the request without functions had
    any of them, or if any request carried a private (`_`-prefixed) field."""
    ask_every_path(llm, messages, functions)
    llm.chat(messages, stream=False)
    *with_tools, without = received()
    assert len(with_tools) == len(PATHS)
    assert not any(key.startswith("_") for fields in (*with_tools, without) for key in fields)
    assert not set(TOOL_FIELDS) & set(without)
    return [{k: fields[k] for k in TOOL_FIELDS if k in fields} for fields in with_tools]
