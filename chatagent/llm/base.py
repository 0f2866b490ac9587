"""BaseChatModel: the one interface every model backend keeps, and the work they share.

A backend implements `_chat_stream` (and `_chat_once` when the server has a cheaper non-streaming
call). Both speak in fragments (see `chatagent.stream`): lists of assistant Messages carrying
`extra['index']`. This class adds what every backend needs: input checks and truncation, retries with
backoff, the three stream modes, usage accounting and prompt-based function calling.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from chatagent.errors import ModelServiceError, RunDeadlineExceeded
from chatagent.keys import clean_api_key
from chatagent.llm.budget import (
    DEFAULT_MAX_INPUT_TOKENS,
    default_answer_tokens,
    known_context_window,
    prompt_tokens,
    truncate_messages,
)
from chatagent.llm.cut_off import cut_call_error as cut_call_error  # re-exported where it was
from chatagent.schema import FUNCTION, USER, ContentItem, FunctionCall, Message, content_text, to_messages
from chatagent.stream import INDEX, Collector, DictResponse, Response, accumulate, collect, fragment
from chatagent.tokens import Tokenizer, tokenizer_for

logger = logging.getLogger("chatagent.llm")

# generate_cfg keys the framework reads itself; every other key goes to the backend's request.
FRAMEWORK_KEYS = frozenset(
    {
        "max_retries",
        "retry_delay",
        "max_retry_wait",
        "max_input_tokens",
        "fncall_prompt_type",
        "parallel_function_calls",
        "function_choice",
        "request_timeout",
        "deadline",
        "use_raw_api",
        "thought_in_content",
        "lang",
        "cache",
        "cache_nondeterministic",
        "cache_dir",
    }
)
# Qwen-Agent keys that have no effect here: taken out of the request, never sent (a strict server rejects them)
IGNORED_KEYS = frozenset({"skip_stopword_postproc"})


@dataclass
class Usage:
    """Tokens used, summed over every model call it was passed to."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0


@dataclass
class Settings:
    """The framework's own settings for one call, taken out of generate_cfg."""

    max_retries: int = 3
    retry_delay: float = 0.5
    max_retry_wait: float = 60.0
    max_input_tokens: int | None = None  # None: the model's input_limit()
    fncall_prompt_type: str | None = None
    parallel_function_calls: bool = True
    function_choice: str = "auto"
    request_timeout: float | None = None
    deadline: float | None = None  # a time.monotonic() value; Agent.run(deadline=...) sets it
    use_raw_api: bool | None = None  # Qwen-Agent's switch: True native tool calling, False prompt-based
    thought_in_content: bool = False  # `<think>...</think>` in the reply's text is reasoning
    lang: str | None = None  # Qwen-Agent's; chatagent detects the language of each conversation itself
    cache: Any = None  # the response cache: 'sqlite:///file.db' or a directory (see chatagent.llm.cache)
    cache_nondeterministic: bool = False  # cache answers of sampling settings too
    cache_dir: Any = None  # Qwen-Agent's name for `cache` with a directory


def split_generate_cfg(cfg: dict) -> tuple[Settings, dict]:
    """Framework settings and the keys to pass through to the backend."""
    ours = {k: v for k, v in cfg.items() if k in FRAMEWORK_KEYS and v is not None}
    rest = {k: v for k, v in cfg.items() if k not in FRAMEWORK_KEYS and k not in IGNORED_KEYS}
    for key in ("use_raw_api", "thought_in_content"):  # Qwen-Agent's docs write them as strings too
        if isinstance(ours.get(key), str):
            ours[key] = ours[key].strip().lower() in ("true", "1", "yes")
    for key, value in ours.items():
        limit = _NUMERIC_SETTINGS.get(key)
        if limit is not None and not _number_at_least(value, *limit):
            kind = "an integer" if limit[0] else "a number"
            raise ValueError(
                f"generate_cfg[{key!r}] must be {kind} {'>=' if limit[2] else '>'} {limit[1]}, got {value!r}"
            )
    return Settings(**ours), rest


# key -> (integer only, bound, bound included)
_NUMERIC_SETTINGS = {
    "max_retries": (True, 0, True),
    "retry_delay": (False, 0, True),
    "max_retry_wait": (False, 0, True),
    "max_input_tokens": (True, 0, False),
    "request_timeout": (False, 0, False),
    "deadline": (False, 0, False),
}


def _number_at_least(value: Any, integer: bool, bound: float, inclusive: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return value >= bound if inclusive else value > bound


def normalize_functions(functions: Iterable[Any] | None) -> list[dict] | None:
    """Function schemas as `{'name', 'description', 'parameters'}` dicts (OpenAI tool dicts accepted)."""
    if not functions:
        return None
    out = []
    for f in functions:
        if not isinstance(f, dict):
            schema = getattr(f, "function", None)  # a BaseTool
            if not isinstance(schema, dict):
                raise TypeError(f"a function must be a schema dict or a tool, got {type(f).__name__}")
            f = schema
        if f.get("type") == "function" and isinstance(f.get("function"), dict):
            f = f["function"]
        if not isinstance(f.get("name"), str):
            raise ValueError(f"function schema without a name: {f!r:.200}")
        out.append(
            {
                "name": f["name"],
                "description": f.get("description", ""),
                "parameters": f.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return out


class BaseChatModel:
    """A chat model. Configure with a dict; call `chat()`.

    `cfg` keys: `model`, `model_server`, `api_key`, `generate_cfg` (passed through to the request, except
    the keys in FRAMEWORK_KEYS), and backend-specific ones.
    """

    model_type = "base"
    #: Whether image content reaches the model as images (else as a text placeholder).
    support_multimodal_input = False
    #: Whether the server takes `tools`; a backend sets it False when the server rejects them.
    native_tools = True
    #: The config keys this class reads (each subclass adds its own); any other key is a TypeError.
    cfg_keys: frozenset[str] = frozenset(
        {"model", "model_type", "model_server", "api_key", "generate_cfg", "multimodal", "cache_dir"}
    )
    #: Whether `context_window` comes from the server itself (it then caps an explicit max_input_tokens too).
    window_from_server = False

    def __init__(self, cfg: dict | None = None) -> None:
        cfg = dict(cfg or {})
        check_cfg_keys(type(self), cfg)
        self.cfg = cfg
        self.model: str = cfg.get("model", "")
        self.generate_cfg: dict = dict(cfg.get("generate_cfg") or {})
        self.api_key: str | None = clean_api_key(cfg.get("api_key"))
        if "multimodal" in cfg:
            self.support_multimodal_input = bool(cfg["multimodal"])
        if cfg.get("cache_dir"):  # Qwen-Agent's place for it: the response cache in a directory
            self.generate_cfg.setdefault("cache", cfg["cache_dir"])
        self._tokenizer: Tokenizer | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # ---- budgets -------------------------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        """How this model counts tokens: its own tokenizer where one is at hand, else the estimate."""
        if self._tokenizer is None:
            self._tokenizer = self._make_tokenizer()
        return self._tokenizer

    def _make_tokenizer(self) -> Tokenizer:
        return tokenizer_for(self.model)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` for this model."""
        return self.tokenizer.count(text)

    @property
    def context_window(self) -> int | None:
        """The model's whole window (prompt and answer) in tokens, when known (see `known_context_window`)."""
        return known_context_window(self.model)

    def max_tokens(self, extra_generate_cfg: dict | None = None) -> int | None:
        """The answer's token limit set in generate_cfg (`max_tokens` or `max_completion_tokens`), if any."""
        cfg = {**self.generate_cfg, **(extra_generate_cfg or {})}
        value = cfg.get("max_tokens") or cfg.get("max_completion_tokens")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def input_limit(self, extra_generate_cfg: dict | None = None) -> int:
        """How many tokens the prompt may take: generate_cfg's `max_input_tokens` when set, else the window
        less the answer's `max_tokens` (a quarter of the window, at most 8192, when that is not set)."""
        explicit = {**self.generate_cfg, **(extra_generate_cfg or {})}.get("max_input_tokens")
        window = self.context_window
        if window is None:
            return explicit or DEFAULT_MAX_INPUT_TOKENS
        room = max(window - (self.max_tokens(extra_generate_cfg) or default_answer_tokens(window)), 1)
        if explicit is None:
            return room
        return min(explicit, room) if self.window_from_server else explicit

    def functions_tokens(self, functions: Iterable[Any] | None, extra_generate_cfg: dict | None = None) -> int:
        """Tokens the tool schemas take in the prompt (as `tools`, or as the prompt-based format's text)."""
        funcs = normalize_functions(functions)
        if not funcs:
            return 0
        settings, _ = split_generate_cfg({**self.generate_cfg, **(extra_generate_cfg or {})})
        return self.tokenizer.count(self._tools_text(funcs, settings))

    def _tools_text(self, funcs: list[dict], settings: Settings) -> str:
        if settings.fncall_prompt_type or not self.native_tools:
            if settings.function_choice == "none":  # the prompt then describes no tools
                return ""
            from chatagent.llm import fncall_prompt

            fmt = fncall_prompt.get_format(settings.fncall_prompt_type or "nous")
            system, _ = fmt.convert([], funcs, settings.function_choice or "auto", settings.parallel_function_calls)
            return content_text(system[0].content)
        return "\n".join(json.dumps({"type": "function", "function": f}, ensure_ascii=False) for f in funcs)

    def tokens_left(
        self,
        messages: Iterable[dict | Message],
        functions: Iterable[Any] | None = None,
        extra_generate_cfg: dict | None = None,
    ) -> int:
        """Tokens still free in the prompt after `messages` and `functions`: what an agent may add."""
        msgs = to_messages(messages)
        used = prompt_tokens(msgs, self.tokenizer, self.functions_tokens(functions, extra_generate_cfg))
        return self.input_limit(extra_generate_cfg) - used

    # ---- the public call -------------------------------------------------------------------------------

    def chat(
        self,
        messages: Iterable[dict | Message],
        functions: Iterable[dict] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict | None = None,
        *,
        usage: Usage | None = None,
    ) -> list[Message] | Iterator[list[Message]]:
        """Ask the model.

        - `stream=False`: returns the list of assistant messages.
        - `stream=True`: an iterator of lists; each the whole response so far (cumulative), or with
          `delta_stream=True` only the new fragments (each with `extra['index']`).

        A reply with function calls holds one assistant message per call (after any text), each with
        `extra['function_id']`; a call appears only once its arguments are complete.

        Messages given as dicts (all of them) get dicts back, as from an agent; Messages get Messages.
        """
        msgs, funcs, gen_cfg, settings, as_dicts = self._inputs(messages, functions, extra_generate_cfg)
        fragments = self._call(msgs, funcs, gen_cfg, settings, usage, stream)
        if not stream:
            reply = collect(fragments)
            return [m.model_dump() for m in reply] if as_dicts else reply
        if delta_stream:
            return _dumped(fragments) if as_dicts else fragments
        return _dict_accumulate(fragments) if as_dicts else accumulate(fragments)

    def quick_chat(self, prompt: str) -> str:
        """The model's answer to one user message, as text (Qwen-Agent's helper)."""
        return response_text(collect(self.chat([Message._make(USER, prompt)], stream=True, delta_stream=True)))

    def achat(
        self,
        messages: Iterable[dict | Message],
        functions: Iterable[dict] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict | None = None,
        *,
        usage: Usage | None = None,
    ) -> Any:
        """`chat()` for asyncio, with the same retries, fallbacks and truncation.

        - `stream=False`: an awaitable of the list of assistant messages.
        - `stream=True`: an async iterator of lists, as `chat()` yields them (`async for rsp in llm.achat(...)`).

        Dicts in give dicts out, as with `chat()`.
        """
        msgs, funcs, gen_cfg, settings, as_dicts = self._inputs(messages, functions, extra_generate_cfg)
        fragments = self._acall(msgs, funcs, gen_cfg, settings, usage, stream)
        if not stream:
            return _acollect(fragments, as_dicts)
        if delta_stream:
            return _adumped(fragments) if as_dicts else fragments
        return _aaccumulate(fragments, as_dicts)

    def _inputs(
        self, messages: Iterable[dict | Message], functions: Iterable[dict] | None, extra_generate_cfg: dict | None
    ) -> tuple[list[Message], list[dict] | None, dict, Settings, bool]:
        """The checked, truncated messages, the function schemas, the backend's cfg, our settings, and whether
        the caller gave dicts (and so gets dicts)."""
        if isinstance(messages, (dict, str, bytes, Message)) or not isinstance(messages, Iterable):
            raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        as_dicts = bool(messages) and not any(isinstance(m, Message) for m in messages)
        msgs = to_messages(messages)
        if not msgs:
            raise ValueError("messages is empty: give at least one user message")
        settings, gen_cfg = split_generate_cfg({**self.generate_cfg, **(extra_generate_cfg or {})})
        if settings.max_input_tokens is None:
            settings.max_input_tokens = self.input_limit(extra_generate_cfg)
        funcs = normalize_functions(functions)
        return self._prepare(msgs, settings, funcs), funcs, gen_cfg, settings, as_dicts

    # ---- what backends implement -------------------------------------------------------------------------

    def _chat_stream(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> Iterator[list[Message]]:
        """Yield fragments of the reply. Raise ModelServiceError (retryable where it is) on failure."""
        raise NotImplementedError

    def _chat_once(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> list[Message]:
        """The whole reply at once; by default the collected stream."""
        return collect(self._chat_stream(messages, functions, cfg, usage))

    async def _achat_stream(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> AsyncIterator[list[Message]]:
        """`_chat_stream` for asyncio. By default the synchronous stream, read in a worker thread; backends with
        an async client override it."""
        import asyncio
        import threading

        stream = self._chat_stream(messages, functions, cfg, usage)
        busy = threading.Lock()  # a cancelled wait leaves `next` running in its thread: close after it

        def step() -> list[Message] | None:
            with busy:
                return next(stream, None)

        def close() -> None:
            with busy:
                stream.close()  # type: ignore[attr-defined]

        try:
            while True:
                fragments = await asyncio.to_thread(step)
                if fragments is None:
                    return
                yield fragments
        finally:
            await asyncio.to_thread(close)

    async def _achat_once(
        self, messages: list[Message], functions: list[dict] | None, cfg: dict, usage: Usage | None
    ) -> list[Message]:
        """`_chat_once` for asyncio; by default the collected async stream."""
        out: list[list[Message]] = []
        async with aclosing(self._achat_stream(messages, functions, cfg, usage)) as stream:
            async for fragments in stream:
                out.append(fragments)
        return collect(out)

    # ---- shared machinery ------------------------------------------------------------------------------

    def _prepare(self, msgs: list[Message], settings: Settings, funcs: list[dict] | None = None) -> list[Message]:
        """Valid text, media the model can take, and the conversation fitted to the input limit, tool schemas
        (native or in the prompt) counted."""
        msgs = [_valid_unicode(m) for m in msgs]
        if not self.support_multimodal_input:
            msgs = [_without_media(m) for m in msgs]
        limit = settings.max_input_tokens or DEFAULT_MAX_INPUT_TOKENS
        if funcs:
            limit -= self.tokenizer.count(self._tools_text(funcs, settings))
        return truncate_messages(msgs, limit, self.tokenizer)

    def _route(
        self, msgs: list[Message], funcs: list[dict] | None, cfg: dict, settings: Settings, usage: Usage | None
    ) -> tuple[bool, dict]:
        """(whether to call tools through a prompt, the backend's cfg) for one call, counted in `usage`."""
        if usage is not None:
            usage.calls += 1
        if settings.request_timeout is not None:  # the one framework setting a backend applies itself
            cfg = {**cfg, "request_timeout": settings.request_timeout}
        raw_api = settings.use_raw_api
        prompted = not self.native_tools or raw_api is False or (bool(settings.fncall_prompt_type) and not raw_api)
        if prompted and (funcs or _has_calls(msgs)):
            # without tools too: earlier calls and results must reach the model as the prompt's text
            settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
            return True, cfg
        if funcs:  # how to call tools travels to the backend inside cfg (tool_choice, parallel_tool_calls)
            if settings.function_choice not in (None, "auto"):
                cfg = {**cfg, "_function_choice": settings.function_choice}
            if not settings.parallel_function_calls:
                cfg = {**cfg, "_parallel_function_calls": False}
        return False, cfg

    def _call(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> Iterator[list[Message]]:
        if settings.cache or settings.cache_dir:
            from chatagent.llm.cache import lookup, recording, replay

            store, key = lookup(self, msgs, funcs, cfg, settings)
            if store is not None:
                stored = store.get(key)
                if stored is not None:
                    return replay(stored)
                return recording(store, key, self._model_call(msgs, funcs, cfg, settings, usage, stream))
        return self._model_call(msgs, funcs, cfg, settings, usage, stream)

    def _model_call(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> Iterator[list[Message]]:
        from chatagent.llm import fncall_prompt

        prompted, cfg = self._route(msgs, funcs, cfg, settings, usage)
        if prompted:
            return fncall_prompt.chat(self, msgs, funcs or [], cfg, settings, usage, stream)
        native = self.backend_reply(msgs, funcs, cfg, settings, usage, stream)
        if funcs:
            native = self._falling_back(native, msgs, funcs, cfg, settings, usage, stream)
        if settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
            from chatagent.llm.fncall_prompt import StreamParser

            native = StreamParser(parse_calls=False).run(native)
        return native

    def _acall(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> AsyncIterator[list[Message]]:
        if settings.cache or settings.cache_dir:
            from chatagent.llm.cache import arecording, lookup

            store, key = lookup(self, msgs, funcs, cfg, settings)
            if store is not None:
                return arecording(store, key, lambda: self._amodel_call(msgs, funcs, cfg, settings, usage, stream))
        return self._amodel_call(msgs, funcs, cfg, settings, usage, stream)

    def _amodel_call(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> AsyncIterator[list[Message]]:
        """`_call` for asyncio: the fragments, as an async iterator (returned, not wrapped: one layer less per chunk)."""
        from chatagent.llm import fncall_prompt

        prompted, cfg = self._route(msgs, funcs, cfg, settings, usage)
        if prompted:
            return fncall_prompt.achat(self, msgs, funcs or [], cfg, settings, usage, stream)
        native = self.abackend_reply(msgs, funcs, cfg, settings, usage, stream)
        parts = self._afalling_back(native, msgs, funcs, cfg, settings, usage, stream) if funcs else native
        if settings.thought_in_content:  # <think>...</think> in the text becomes reasoning_content
            return _athoughts(parts)
        return parts

    def backend_reply(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> Iterator[list[Message]]:
        """The backend's own reply to `msgs` as fragment lists, with the retry and deadline rules, and nothing
        else: no cache, no tool routing, no parsing. The interface for layers that speak their own protocol
        through the model (prompt-based function calling)."""
        if stream:
            return self._retrying(lambda: self._chat_stream(msgs, funcs, attempt_cfg(cfg, settings), usage), settings)
        return self._retrying(
            lambda: _as_fragments(self._chat_once(msgs, funcs, attempt_cfg(cfg, settings), usage)), settings
        )

    def abackend_reply(
        self,
        msgs: list[Message],
        funcs: list[dict] | None,
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> AsyncIterator[list[Message]]:
        """`backend_reply` for asyncio."""
        if stream:
            return self._aretrying(lambda: self._achat_stream(msgs, funcs, attempt_cfg(cfg, settings), usage), settings)
        return self._aretrying(
            lambda: _aas_fragments(self._achat_once(msgs, funcs, attempt_cfg(cfg, settings), usage)), settings
        )

    def _falling_back(
        self,
        native: Iterator[list[Message]],
        msgs: list[Message],
        funcs: list[dict],
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> Iterator[list[Message]]:
        """Native tool calling; if the server rejects `tools` (code 'tools_unsupported'), switch this model
        to prompt-based function calling for good and answer this call that way."""
        from chatagent.llm import fncall_prompt

        try:
            yield from native
        except ModelServiceError as e:
            self._give_up_native_tools(e)
            settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
            yield from fncall_prompt.chat(self, msgs, funcs, cfg, settings, usage, stream)

    async def _afalling_back(
        self,
        native: AsyncIterator[list[Message]],
        msgs: list[Message],
        funcs: list[dict],
        cfg: dict,
        settings: Settings,
        usage: Usage | None,
        stream: bool,
    ) -> AsyncIterator[list[Message]]:
        """`_falling_back` for asyncio."""
        from chatagent.llm import fncall_prompt

        try:
            async with aclosing(native) as parts:  # type: ignore[type-var]
                async for f in parts:
                    yield f
            return
        except ModelServiceError as e:
            self._give_up_native_tools(e)
        settings.fncall_prompt_type = settings.fncall_prompt_type or "nous"
        async with aclosing(fncall_prompt.achat(self, msgs, funcs, cfg, settings, usage, stream)) as parts:
            async for f in parts:
                yield f

    def _give_up_native_tools(self, e: ModelServiceError) -> None:
        """After `e` from a call with native tools: re-raise it, unless the server rejects tools (then this model
        uses prompt-based function calling from now on)."""
        if e.code != "tools_unsupported" or e.partial:
            raise e
        logger.warning("%s rejects native tools (%s): using prompt-based function calling", self.model, e.message)
        self.native_tools = False

    def _retrying(self, attempt: Callable[[], Iterable[list[Message]]], settings: Settings) -> Iterator[list[Message]]:
        """Run `attempt`, retrying transient failures that happen before anything was yielded.

        A stream that breaks after content was yielded is not replayed (the caller would see the
        start twice): it raises ModelServiceError with `partial=True`. With `settings.deadline`, a failure
        after the deadline raises RunDeadlineExceeded, and no retry waits past the deadline.
        """
        tries = 0
        while True:
            yielded = False
            try:
                for fragments in attempt():
                    yielded = True
                    yield fragments
                return
            except ModelServiceError as e:
                wait = self._retry_wait(e, tries, settings, yielded)
            tries += 1
            time.sleep(wait)

    async def _aretrying(
        self, attempt: Callable[[], AsyncIterator[list[Message]]], settings: Settings
    ) -> AsyncIterator[list[Message]]:
        """`_retrying` for asyncio (the same rules)."""
        import asyncio

        tries = 0
        while True:
            yielded = False
            try:
                async with aclosing(attempt()) as stream:  # type: ignore[type-var]
                    async for fragments in stream:
                        yielded = True
                        yield fragments
                return
            except ModelServiceError as e:
                wait = self._retry_wait(e, tries, settings, yielded)
            tries += 1
            await asyncio.sleep(wait)

    def _retry_wait(self, e: ModelServiceError, tries: int, settings: Settings, yielded: bool) -> float:
        """After failure `e` of try number `tries`: how long to wait before the next try, or raise what the
        caller must raise instead."""
        e.scrubbed(self.api_key)
        deadline = settings.deadline
        if deadline is not None and time.monotonic() >= deadline:
            raise RunDeadlineExceeded(f"the run went past its deadline waiting for the model ({e})") from e
        if yielded:
            e.partial = True
            raise e
        if not e.retryable or tries >= settings.max_retries:
            raise e
        wait = _backoff(tries, settings.retry_delay, e.retry_after, settings.max_retry_wait)
        if deadline is not None and time.monotonic() + wait >= deadline:
            logger.warning("%s: %s; not retried: waiting %.2fs would pass the run's deadline", self.model, e, wait)
            raise e
        logger.warning(
            "%s: %s; retry %d/%d in %.2fs", self.model or self.model_type, e, tries + 1, settings.max_retries, wait
        )
        return wait


def attempt_cfg(cfg: dict, settings: Settings) -> dict:
    """`cfg` for one request. With `settings.deadline`, `request_timeout` (the backend's connect and read
    timeout) is capped by the time left, so that a stalled server cannot hold a run past its deadline."""
    if settings.deadline is None:
        return cfg
    left = settings.deadline - time.monotonic()
    if left <= 0:
        raise RunDeadlineExceeded("the run went past its deadline before the model was called")
    timeout = cfg.get("request_timeout")
    return {**cfg, "request_timeout": left if timeout is None else min(timeout, left)}


def check_cfg_keys(cls: type[BaseChatModel], cfg: dict) -> None:
    """TypeError for a config key no class in `cls`'s hierarchy reads (a misspelt `model_server` would
    otherwise fall back to another server without a word)."""
    known = set().union(*(getattr(k, "cfg_keys", ()) for k in cls.__mro__))
    unknown = [k for k in cfg if k not in known and k not in IGNORED_KEYS]
    if unknown:
        from chatagent._kwargs import unexpected_keyword

        error = unexpected_keyword(f"{cls.__name__} config", unknown, known)
        raise TypeError(str(error).replace("keyword argument", "key"))


def _dumped(fragments: Iterator[list[Message]]) -> Iterator[list[dict]]:
    for frs in fragments:
        yield [f.model_dump() for f in frs]


def _dict_accumulate(fragments: Iterator[list[Message]]) -> Iterator[list[dict]]:
    """Fragments in, the whole response so far as dicts out (each yield a new list)."""
    response = DictResponse()
    for frs in fragments:
        if frs:
            response.add(frs)
            yield list(response.messages)


def _has_calls(msgs: list[Message]) -> bool:
    return any(m.role == FUNCTION or m.function_call is not None for m in msgs)


def _as_fragments(msgs: list[Message]) -> Iterator[list[Message]]:
    yield [fragment(m, i) for i, m in enumerate(msgs)]


async def _aas_fragments(reply: Awaitable[list[Message]]) -> AsyncIterator[list[Message]]:
    yield [fragment(m, i) for i, m in enumerate(await reply)]


async def _acollect(fragments: AsyncIterator[list[Message]], as_dicts: bool = False) -> list:
    collector = Collector()
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for f in parts:
            collector.add(f)
    reply = collector.messages()
    return [m.model_dump() for m in reply] if as_dicts else reply


async def _aaccumulate(fragments: AsyncIterator[list[Message]], as_dicts: bool = False) -> AsyncIterator[list]:
    response: Response | DictResponse = DictResponse() if as_dicts else Response()
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for f in parts:
            if f:
                response.add(f)
                yield list(response.messages)


def _athoughts(fragments: AsyncIterator[list[Message]]) -> AsyncIterator[list[Message]]:
    """The stream with `<think>...</think>` in its text as reasoning_content (generate_cfg thought_in_content)."""
    from chatagent.llm.fncall_prompt import StreamParser

    return StreamParser(parse_calls=False).arun(fragments)


async def _adumped(fragments: AsyncIterator[list[Message]]) -> AsyncIterator[list[dict]]:
    async with aclosing(fragments) as parts:  # type: ignore[type-var]
        async for frs in parts:
            yield [f.model_dump() for f in frs]


def _backoff(tries: int, base: float, retry_after: float | None, cap: float) -> float:
    """Exponential backoff with full jitter; the server's Retry-After wins when it gave one."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    return min(cap, base * (2**tries)) * (0.5 + random.random() / 2)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _fix_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _valid_unicode(m: Message) -> Message:
    """`m` encodable as UTF-8: lone surrogates (from broken decoding upstream) in its text become U+FFFD.

    Without this, one such character makes the request's JSON encoding fail before anything is sent.
    Non-text content items (paths, URLs) are left as they are: they must still name their files.
    """
    fc = m.function_call
    texts = [m.content if isinstance(m.content, str) else "", m.name or "", m.reasoning_content or ""]
    if fc is not None:
        texts += [fc.name, fc.arguments]
    if not isinstance(m.content, str):
        texts += [item.text for item in m.content if item.text is not None]
    if not any(_SURROGATE.search(t) for t in texts):
        return m
    logger.warning("invalid Unicode (lone surrogates) in a %s message replaced with U+FFFD", m.role)
    if isinstance(m.content, str):
        content: str | list[ContentItem] = _fix_surrogates(m.content)
    else:
        content = [ContentItem(text=_fix_surrogates(i.text)) if i.text is not None else i for i in m.content]
    return m.copy(
        content=content,
        name=_fix_surrogates(m.name) if m.name else m.name,
        reasoning_content=_fix_surrogates(m.reasoning_content) if m.reasoning_content else m.reasoning_content,
        function_call=FunctionCall(_fix_surrogates(fc.name), _fix_surrogates(fc.arguments)) if fc else None,
    )


def _without_media(m: Message) -> Message:
    """A text-only model gets a readable placeholder for each image, audio or video item."""
    if isinstance(m.content, str) or all(item.kind in ("text", "file") for item in m.content):
        return m
    items = [
        item if item.kind in ("text", "file") else ContentItem(text=f"[{item.kind}: {os.path.basename(item.value)}]")
        for item in m.content
    ]
    return m.copy(content=items)


# ---- registry ---------------------------------------------------------------------------------------------

# model_type -> class, or "module:Class" imported on first use so that `import chatagent` stays fast.
LLM_REGISTRY: dict[str, type[BaseChatModel] | str] = {
    "oai": "chatagent.llm.openai_compat:OpenAICompatModel",
    "dashscope": "chatagent.llm.dashscope:DashScopeModel",
    "azure": "chatagent.llm.azure:AzureModel",
    "local": "chatagent.llm.local:LocalModel",
    "scripted": "chatagent.llm.scripted:ScriptedLLM",
}
# Qwen-Agent's model_type names: (ours, config defaults they imply)
MODEL_TYPE_ALIASES: dict[str, tuple[str, dict]] = {
    "qwen_dashscope": ("dashscope", {}),
    "qwenvl_dashscope": ("dashscope", {"multimodal": True}),
    "qwenaudio_dashscope": ("dashscope", {"multimodal": True}),
    "qwenvlo_dashscope": ("dashscope", {"multimodal": True}),
    "qwenvl_oai": ("oai", {"multimodal": True}),
    "qwenaudio_oai": ("oai", {"multimodal": True}),
    "qwenomni_oai": ("oai", {"multimodal": True}),
}
UNSUPPORTED_MODEL_TYPES = {
    "transformers": "Hugging Face transformers in-process",
    "openvino": "OpenVINO in-process",
}
DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


def register_llm(model_type: str) -> Callable[[type[BaseChatModel]], type[BaseChatModel]]:
    """Class decorator: make `{'model_type': model_type}` configs build this class."""

    def decorator(cls: type[BaseChatModel]) -> type[BaseChatModel]:
        cls.model_type = model_type
        LLM_REGISTRY[model_type] = cls
        return cls

    return decorator


def _llm_class(model_type: str) -> type[BaseChatModel]:
    entry = LLM_REGISTRY.get(model_type)
    if entry is None:
        if model_type in UNSUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type {model_type!r} ({UNSUPPORTED_MODEL_TYPES[model_type]}) is not supported: serve the "
                "model with an OpenAI-compatible server (vLLM, SGLang, Ollama) and give its URL as model_server, "
                "or use a GGUF file with model_type 'local'"
            )
        raise ValueError(f"unknown model_type {model_type!r}; registered: {', '.join(sorted(LLM_REGISTRY))}")
    if isinstance(entry, str):
        import importlib

        module, _, name = entry.partition(":")
        entry = getattr(importlib.import_module(module), name)
        LLM_REGISTRY[model_type] = entry
    return entry


def default_llm_config() -> dict:
    """The model to use when an agent gets none: DashScope, then an OpenAI-compatible server, then local.

    `DASHSCOPE_API_KEY` set gives DashScope's qwen-plus; `OPENAI_API_KEY` (with `OPENAI_BASE_URL` and
    `OPENAI_MODEL`) gives that server; otherwise the embedded local model.
    """
    if os.environ.get("DASHSCOPE_API_KEY"):
        return {"model_type": "dashscope", "model": os.environ.get("DASHSCOPE_MODEL", "qwen-plus")}
    if os.environ.get("OPENAI_API_KEY"):
        cfg = {"model_type": "oai", "model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini")}
        if os.environ.get("OPENAI_BASE_URL"):
            cfg["model_server"] = os.environ["OPENAI_BASE_URL"]
        return cfg
    logger.warning(
        "no model configured: using the embedded local model (small and weak). "
        "Set DASHSCOPE_API_KEY, or OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL, to use a real one."
    )
    return {"model_type": "local"}


def get_chat_model(cfg: dict | str | BaseChatModel | None = None) -> BaseChatModel:
    """A model from a config dict (or the instance itself; a string is a model name); None picks
    `default_llm_config()`. Qwen-Agent's model_type names are accepted (see MODEL_TYPE_ALIASES)."""
    if isinstance(cfg, BaseChatModel):
        return cfg
    if cfg is None:
        cfg = default_llm_config()
    if isinstance(cfg, str):
        cfg = {"model": cfg}
    if not isinstance(cfg, dict):
        raise TypeError(f"llm must be a config dict or a BaseChatModel, got {type(cfg).__name__}")
    cfg = dict(cfg)
    model_type = cfg.get("model_type")
    if model_type in MODEL_TYPE_ALIASES:
        model_type, implied = MODEL_TYPE_ALIASES[model_type]
        cfg = {**implied, **cfg}
    if model_type == "oai" and str(cfg.get("model_server") or "").strip().lower() == "dashscope":
        cfg["model_server"] = DASHSCOPE_COMPATIBLE_URL  # DashScope's OpenAI-compatible mode, as Qwen-Agent reads it
    if model_type is None and cfg.get("azure_endpoint"):
        model_type = "azure"
    if model_type is None:
        server = str(cfg.get("model_server") or "").strip()
        if server.lower() == "dashscope":
            model_type = "dashscope"
        elif server.lower() == "local" or str(cfg.get("model", "")).endswith(".gguf"):
            model_type = "local"
        elif server.startswith(("http://", "https://")) or server.lower() == "openai":
            model_type = "oai"
        elif not server and os.environ.get("DASHSCOPE_API_KEY") and str(cfg.get("model", "")).startswith("qwen"):
            model_type = "dashscope"
        else:
            model_type = "oai"
    cfg["model_type"] = model_type
    return _llm_class(model_type)(cfg)


def response_text(msgs: list[Message]) -> str:
    """The text of an LLM reply: its assistant messages' text joined."""
    return "".join(content_text(m.content) for m in msgs if m.function_call is None)


__all__ = [
    "BaseChatModel",
    "LLM_REGISTRY",
    "ModelServiceError",
    "Usage",
    "get_chat_model",
    "register_llm",
    "default_llm_config",
    "truncate_messages",
    "INDEX",
]
