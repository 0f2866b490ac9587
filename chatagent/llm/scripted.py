"""ScriptedLLM: a deterministic model for tests, yours and ours.

    llm = ScriptedLLM([
        'Hello!',                                        # a text reply, streamed in small chunks
        tool_call('get_weather', {'city': 'Paris'}),     # a function call
        [tool_call('a', {}), tool_call('b', {})],        # parallel calls
        Reply(text='Sunny.', reasoning='The tool said so.', chunks=['Sun', 'ny.']),
        ModelServiceError(429, 'slow down', retryable=True),   # raised when this call comes
        lambda messages, functions: f'you said {messages[-1].text}',   # computed from the input
    ])
    ...
    llm.calls[0].messages      # what the model was sent, call by call (.tool_choice: how it could call tools)
    llm.assert_complete()      # every scripted reply was used

It goes through the same BaseChatModel machinery (retries, truncation, stream modes) as real backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from chatagent.llm.base import DEFAULT_TOOL_CHOICE, BaseChatModel, ToolChoice, Usage, check_cfg_keys
from chatagent.llm.registry import register_llm
from chatagent.schema import ASSISTANT, FunctionCall, Message
from chatagent.schema.fragment import Fragment
from chatagent.utils.tokens import count_tokens


@dataclass
class Reply:
    """One scripted model reply: text (streamed as `chunks` if given), reasoning, function calls."""

    text: str = ""
    function_calls: list[FunctionCall] = field(default_factory=list)
    reasoning: str = ""
    chunks: list[str] | None = None
    chunk_size: int | None = None

    def text_chunks(self, default_size: int) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        size = self.chunk_size or default_size
        return [self.text[i : i + size] for i in range(0, len(self.text), size)]


def tool_call(name: str, arguments: dict[str, Any] | str | None = None) -> FunctionCall:
    """A scripted function call; dict arguments are sent as JSON."""
    return FunctionCall(name, arguments if arguments is not None else {})


@dataclass
class ScriptedCall:
    """What one call to the model received."""

    messages: list[Message]
    functions: list[dict[str, Any]] | None
    generate_cfg: dict[str, Any]
    tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE


# A reply computed from the call: called with (messages, functions), it returns any other kind of reply.
ComputedReply: TypeAlias = Callable[[list[Message], list[dict[str, Any]] | None], Any]
# What a script holds: a reply, an error to raise, or a function that makes the reply.
ScriptItem: TypeAlias = (
    str | Reply | FunctionCall | Message | Sequence[FunctionCall] | Sequence[str] | BaseException | ComputedReply
)


@register_llm("scripted")
class ScriptedLLM(BaseChatModel):
    """Replies from a script, in order. `chunk_size` sets how text is split when streamed (default 4).

    `default` (a reply) is used once the script runs out; without it, running out is an error.
    """

    support_multimodal_input = True
    stream_blocks = False  # nothing here blocks: `achat` reads the stream on the event loop
    cfg_keys = frozenset({"replies", "default", "chunk_size"})

    def __init__(
        self,
        replies: list[ScriptItem] | dict[str, Any] | None = None,
        *,
        chunk_size: int = 4,
        default: ScriptItem | None = None,
        model: str = "scripted",
        generate_cfg: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(replies, dict):  # built from a config dict by get_chat_model
            cfg: dict[str, Any] = replies
            check_cfg_keys(type(self), cfg)
            replies = cfg.get("replies", [])
            default = cfg.get("default", default)
            chunk_size = cfg.get("chunk_size", chunk_size)
            generate_cfg = cfg.get("generate_cfg", generate_cfg)
            model = cfg.get("model", model)
        super().__init__({"model": model, "generate_cfg": generate_cfg or {}})
        self.script: list[ScriptItem] = list(replies or [])
        self.chunk_size = chunk_size
        self.default = default
        self.calls: list[ScriptedCall] = []
        self._lock = threading.Lock()
        self._next = 0

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self.script) - self._next

    def assert_complete(self) -> None:
        """Raise AssertionError if some scripted replies were never asked for."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedLLM: {self.remaining} of {len(self.script)} scripted replies were not used "
                f"(next: {self.script[self._next]!r:.100})"
            )

    def _take(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        tool_choice: ToolChoice,
    ) -> object:
        """Record the call; the script item that answers it (a computed reply: what its function returned)."""
        with self._lock:
            self.calls.append(ScriptedCall(messages, functions, cfg, tool_choice))
            if self._next < len(self.script):
                item = self.script[self._next]
                self._next += 1
            elif self.default is not None:
                item = self.default
            else:
                raise AssertionError(
                    f"ScriptedLLM: call #{len(self.calls)} but the script has only {len(self.script)} replies"
                )
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, type):
            made: object = item(messages, functions)
            if isinstance(made, BaseException):
                raise made
            return made
        return item

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        reply = _as_reply(self._take(messages, functions, cfg, tool_choice))
        make = Fragment.unchecked
        index = 0
        if reply.reasoning:
            yield [make(ASSISTANT, "", None, None, reply.reasoning, None, 0)]
        chunks = reply.text_chunks(self.chunk_size)
        for chunk in chunks:
            yield [make(ASSISTANT, chunk, None, None, None, None, 0)]
        if reply.reasoning or chunks:
            index = 1
        for n, call in enumerate(reply.function_calls):
            extra = {"function_id": f"call_{len(self.calls)}_{n}"}
            yield [make(ASSISTANT, "", None, call, None, extra, index + n)]
        if not (reply.reasoning or chunks or reply.function_calls):
            yield [make(ASSISTANT, "", None, None, None, None, 0)]
        if usage is not None:
            prompt = sum(count_tokens(m.text) for m in messages)
            usage.add(prompt, count_tokens(reply.text) + count_tokens(reply.reasoning))


def _as_reply(item: object) -> Reply:
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply(text=item)
    if isinstance(item, FunctionCall):
        return Reply(function_calls=[item])
    if isinstance(item, Message):
        return Reply(text=item.text, function_calls=[item.function_call] if item.function_call else [])
    if isinstance(item, (list, tuple)):
        items = cast("Sequence[object]", item)  # any list or tuple is one; its items are checked here
        calls = [x for x in items if isinstance(x, FunctionCall)]
        if len(calls) == len(items):
            return Reply(function_calls=calls)
        texts = [x for x in items if isinstance(x, str)]
        if len(texts) == len(items):
            return Reply(text="".join(texts), chunks=texts)
    raise TypeError(f"ScriptedLLM: cannot use {item!r:.100} as a reply (str, Reply, FunctionCall, list, exception)")
