"""BaseChatModel: the one interface every model backend keeps, and the work they share.

A backend implements `_chat_stream` (and `_chat_once` when the server has a cheaper non-streaming
call). Both speak in fragments (see `chatagent.schema.stream`): lists of assistant `Fragment`s, Messages that
carry their `index`. This class adds what every backend needs: input checks and truncation, retries with
backoff, the three stream modes, usage accounting and prompt-based function calling.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Literal, TypeAlias, TypeVar, cast, overload

from chatagent.errors import ModelServiceError
from chatagent.llm import qwen_backend
from chatagent.llm.budget import DEFAULT_MAX_INPUT_TOKENS, TokenBudget, truncate_messages
from chatagent.llm.cut_off import cut_call_error as cut_call_error  # re-exported where it was
from chatagent.llm.inputs import Prepared
from chatagent.llm.pacing import Pace, pace_of
from chatagent.llm.prepare import normalize_functions
from chatagent.llm.pumps import aplayed, played
from chatagent.llm.request import ASYNC, SYNC, ModelRequest, Reading, ReplyStream, Usage
from chatagent.llm.retry import RetryBudget, budget_of, retrying
from chatagent.llm.routing import plan
from chatagent.llm.settings import (
    DEFAULT_TOOL_CHOICE,
    FRAMEWORK_KEYS,
    IGNORED_KEYS,
    Settings,
    ToolChoice,
    attempt_cfg,
    backend_choice,
    check_cfg_keys,
    check_generate_cfg,
    choice_args,
    split_generate_cfg,
)
from chatagent.llm.stream_modes import (
    aaccumulate,
    acollect,
    closing_stream,
    dict_accumulate,
    dumped,
    in_worker_thread,
    on_the_loop,
)
from chatagent.schema import USER, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import accumulate, collect
from chatagent.utils.keys import clean_api_key, remember_endpoint
from chatagent.utils.tokens import Tokenizer

logger = logging.getLogger("chatagent.llm")

# what chat() returns: Messages for Messages, dicts for dicts; a list (stream=False) or an iterator of lists
_Reply: TypeAlias = "list[Message] | list[dict[str, Any]]"
_Stream: TypeAlias = "Iterator[list[Message]] | Iterator[list[Fragment]] | Iterator[list[dict[str, Any]]]"


# model_type -> class, or "module:Class" imported on first use so that `import chatagent` stays fast.
LLM_REGISTRY: dict[str, type[BaseChatModel] | str] = {
    "oai": "chatagent.llm.openai.chat:OpenAICompatModel",
    "dashscope": "chatagent.llm.dashscope.chat:DashScopeModel",
    "azure": "chatagent.llm.openai.azure:AzureModel",
    "anthropic": "chatagent.llm.anthropic.model:AnthropicModel",
    "gemini": "chatagent.llm.gemini.model:GeminiModel",
    "bedrock": "chatagent.llm.bedrock.model:BedrockModel",
    "local": "chatagent.llm.local.model:LocalModel",
    "scripted": "chatagent.llm.scripted:ScriptedLLM",
    "fallback": "chatagent.llm.fallback:FallbackModel",
}
_Model = TypeVar("_Model", bound="type[BaseChatModel]")


def register_llm(model_type: str) -> Callable[[_Model], _Model]:
    """Class decorator: make `{'model_type': model_type}` configs build this class (see `chatagent.llm.registry`)."""

    def decorator(cls: _Model) -> _Model:
        cls.model_type = model_type
        LLM_REGISTRY[model_type] = cls
        return cls

    return decorator


class BaseChatModel(TokenBudget):
    """A chat model. Configure with a dict; call `chat()`.

    `cfg` keys: `model`, `model_server`, `api_key`, `generate_cfg` (passed through to the request, except
    the keys in FRAMEWORK_KEYS), and backend-specific ones.

    A backend implements `_chat_stream(messages, functions, cfg, usage)` (and, where it has cheaper ones,
    `_chat_once`, `_achat_stream`, `_achat_once`, same arguments). `cfg` holds the request's own keys, plus
    `request_timeout` (capped by the run's deadline); no framework option travels in it. How the model may call
    `functions` comes as the keyword `tool_choice` (a `ToolChoice`), passed only when it differs from the
    default ('auto', parallel calls allowed), as the agent loop passes `chat(deadline=...)` only when the run
    has a deadline. So a backend without the keyword keeps working while the choice is the default, and a
    forced choice ('none', 'required', a function's name, or parallel_function_calls=False) sent to it fails
    with TypeError naming `tool_choice` instead of being ignored. Declare `*, tool_choice: ToolChoice =
    DEFAULT_TOOL_CHOICE` to honour it; without functions it is never passed.
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
    #: Whether reading `_chat_stream` may block (on the network): `_achat_stream` then reads it in a worker thread by
    #: default; a backend whose stream never blocks (a script) says False and is read on the event loop.
    stream_blocks = True
    #: Whether `context_window` comes from the server itself (it then caps an explicit max_input_tokens too).
    window_from_server = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        qwen_backend.adapt(cls)  # a backend written for Qwen-Agent (its _chat_stream / _chat_no_stream) works as it is

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        check_cfg_keys(type(self), cfg)
        self.cfg = cfg
        self.model: str = cfg.get("model", "")
        self.generate_cfg: dict[str, Any] = dict(cfg.get("generate_cfg") or {})
        check_generate_cfg(self.generate_cfg)  # a bad value fails here, naming its key, not at the first call
        self.api_key: str | None = clean_api_key(cfg.get("api_key"))
        for key in ("model_server", "base_url", "api_base"):  # never named to a client (ModelServiceError)
            remember_endpoint(cfg.get(key))
        if "multimodal" in cfg:
            self.support_multimodal_input = bool(cfg["multimodal"])
        if cfg.get("cache_dir"):  # Qwen-Agent's place for it: the response cache in a directory
            self.generate_cfg.setdefault("cache", cfg["cache_dir"])
        self._tokenizer: Tokenizer | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # ---- the public call -------------------------------------------------------------------------------

    @overload
    def chat(
        self,
        messages: Iterable[Message],
        functions: Iterable[Any] | None = None,
        stream: Literal[True] = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> Iterator[list[Message]]: ...

    @overload
    def chat(
        self,
        messages: Iterable[Message],
        functions: Iterable[Any] | None = None,
        *,
        stream: Literal[False],
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> list[Message]: ...

    @overload
    def chat(
        self,
        messages: Iterable[dict[str, Any]],
        functions: Iterable[Any] | None = None,
        stream: Literal[True] = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> Iterator[list[dict[str, Any]]]: ...

    @overload
    def chat(
        self,
        messages: Iterable[dict[str, Any]],
        functions: Iterable[Any] | None = None,
        *,
        stream: Literal[False],
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]: ...

    @overload
    def chat(
        self,
        messages: Iterable[dict[str, Any] | Message],
        functions: Iterable[Any] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> _Reply | _Stream: ...

    def chat(
        self,
        messages: Iterable[dict[str, Any] | Message],
        functions: Iterable[Any] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> _Reply | _Stream:
        """Ask the model.

        - `stream=False`: returns the list of assistant messages.
        - `stream=True`: an iterator of lists; each the whole response so far (cumulative), or with
          `delta_stream=True` only the new fragments (`Fragment`s, each with its `index`).

        A reply with function calls holds one assistant message per call (after any text), each with
        `extra['function_id']`; a call appears only once its arguments are complete.

        Messages given as dicts (all of them) get dicts back, as from an agent; Messages get Messages.
        `deadline` (a `time.monotonic()` value; `Agent.run(deadline=...)` passes the run's) caps the request
        timeouts and retry waits: past it, RunDeadlineExceeded.
        """
        request, as_dicts = self._inputs(messages, functions, extra_generate_cfg, deadline, usage, stream)
        fragments = plan(self, request).reply(SYNC)
        if not stream:
            reply = collect(fragments)
            return [m.model_dump() for m in reply] if as_dicts else reply
        if delta_stream:
            return played(dumped(fragments)) if as_dicts else fragments
        return dict_accumulate(fragments) if as_dicts else accumulate(fragments)

    def quick_chat(self, prompt: str) -> str:
        """The model's answer to one user message, as text (Qwen-Agent's helper)."""
        return response_text(collect(self.chat([Message(USER, prompt)], stream=True, delta_stream=True)))

    def achat(
        self,
        messages: Iterable[dict[str, Any] | Message],
        functions: Iterable[Any] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> Any:
        """`chat()` for asyncio, with the same retries, fallbacks and truncation.

        - `stream=False`: an awaitable of the list of assistant messages.
        - `stream=True`: an async iterator of lists, as `chat()` yields them (`async for rsp in llm.achat(...)`).

        Dicts in give dicts out, as with `chat()`.
        """
        request, as_dicts = self._inputs(messages, functions, extra_generate_cfg, deadline, usage, stream)
        fragments = plan(self, request).reply(ASYNC)
        if not stream:
            return acollect(fragments, as_dicts)
        if delta_stream:
            return aplayed(dumped(fragments)) if as_dicts else fragments
        return aaccumulate(fragments, as_dicts)

    def _inputs(
        self,
        messages: Iterable[dict[str, Any] | Message],
        functions: Iterable[Any] | None,
        extra_generate_cfg: dict[str, Any] | None,
        deadline: float | None,
        usage: Usage | None,
        stream: bool,
    ) -> tuple[ModelRequest, bool]:
        """The request (the checked, truncated messages, the function schemas, the backend's cfg, our settings) and
        whether the caller gave dicts (and so gets dicts)."""
        given = cast(object, messages)  # what callers pass is checked, whatever its declared type
        if isinstance(given, (dict, str, bytes, Message)) or not isinstance(given, Iterable):
            raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
        listed = list(messages)
        as_dicts = bool(listed) and not any(isinstance(m, Message) for m in listed)
        msgs, most = self._prepared().messages(listed, self.support_multimodal_input)
        if not msgs:
            raise ValueError("messages is empty: give at least one user message")
        settings, gen_cfg = split_generate_cfg({**self.generate_cfg, **(extra_generate_cfg or {})})
        if settings.max_input_tokens is None:
            settings.max_input_tokens = self.input_limit(extra_generate_cfg)
        if deadline is not None:
            settings.deadline = deadline
        funcs = normalize_functions(functions)
        msgs = self._prepare(msgs, settings, funcs, most)
        return ModelRequest(msgs, funcs, gen_cfg, settings, usage, stream), as_dicts

    # ---- what backends implement -------------------------------------------------------------------------

    def _chat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> Iterator[list[Fragment]]:
        """Yield fragments of the reply to `messages`, with `functions` offered as tools as `tool_choice` says (see
        the class docstring). Raise ModelServiceError (retryable where it is) on failure."""
        raise NotImplementedError

    def _chat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        """The whole reply at once; by default the collected stream."""
        return collect(self._chat_stream(messages, functions, cfg, usage, **choice_args(tool_choice)))

    def _achat_stream(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> AsyncIterator[list[Fragment]]:
        """`_chat_stream` for asyncio. By default the synchronous stream, read in a worker thread (on the loop when it
        never blocks: `stream_blocks`); backends with an async client override it."""
        choice = choice_args(tool_choice)  # the keyword only when not the default, for a _chat_stream without it
        start = lambda: self._chat_stream(messages, functions, cfg, usage, **choice)  # noqa: E731
        return in_worker_thread(start) if self.stream_blocks else on_the_loop(start)

    async def _achat_once(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]] | None,
        cfg: dict[str, Any],
        usage: Usage | None,
        *,
        tool_choice: ToolChoice = DEFAULT_TOOL_CHOICE,
    ) -> list[Message]:
        """`_chat_once` for asyncio; by default the collected async stream."""
        out: list[list[Fragment]] = []
        parts = self._achat_stream(messages, functions, cfg, usage, **choice_args(tool_choice))
        async with closing_stream(parts) as stream:
            async for fragments in stream:
                out.append(fragments)
        return collect(out)

    # ---- shared machinery ------------------------------------------------------------------------------

    def _prepared(self) -> Prepared:
        """This model's input messages as prepared (`chatagent.llm.inputs`): each copied, its text made valid and its
        media replaced for a text-only model once, not at every call that gives it again."""
        kept = self.__dict__.get("_prepared_inputs")
        if kept is None:
            kept = self.__dict__["_prepared_inputs"] = Prepared()
        return kept

    def _prepare(
        self,
        msgs: list[Message],
        settings: Settings,
        funcs: list[dict[str, Any]] | None = None,
        most: int | None = None,
    ) -> list[Message]:
        """The prepared messages (`_prepared`) fitted to the input limit, tool schemas (native or in the prompt)
        counted; `most`: their most tokens, when known."""
        limit = settings.max_input_tokens or DEFAULT_MAX_INPUT_TOKENS
        if funcs:
            limit -= self.tokenizer.count(self._tools_text(funcs, settings))
        return truncate_messages(msgs, limit, self.tokenizer, long_input=settings.long_input, most=most)

    def backend_reply(self, request: ModelRequest, io: Reading[ReplyStream]) -> ReplyStream:
        """The backend's own reply to `request` as fragment lists, read as `io` says, with the retry and deadline rules,
        and nothing else: no cache, no tool routing, no parsing (see `chatagent.llm.request.Backend`). With
        functions, the backend gets the settings' tool choice. Retries come from the server's budget, paced by
        `max_rpm` (see `chatagent.llm.retry.retrying`)."""
        msgs, funcs, usage, settings = request.messages, request.functions, request.usage, request.settings
        choice = backend_choice(funcs, settings)
        ask = io.stream(self) if request.stream else io.once(self)
        name = self.model or self.model_type
        return io.played(retrying(
            lambda: ask(msgs, funcs, attempt_cfg(request.cfg, settings), usage, **choice),
            settings, name, self.api_key, self._pace(settings), self._retry_budget(),
        ))  # fmt: skip

    def _retry_budget(self) -> RetryBudget:
        """The retry budget every model on this server shares (`chatagent.llm.retry.RetryBudget`)."""
        return budget_of(f"{type(self).__name__}|{self.cfg.get('model_server') or ''}")

    def _pace(self, settings: Settings) -> Pace | None:
        """The shared pace of this model's requests with `max_rpm` (see `chatagent.llm.pacing`)."""
        if settings.max_rpm is None:
            return None
        return pace_of(f"{type(self).__name__}|{self.cfg.get('model_server') or ''}|{self.model}", settings.max_rpm)


def response_text(msgs: list[Message]) -> str:
    """The text of an LLM reply: its assistant messages' text joined."""
    return "".join(content_text(m.content) for m in msgs if m.function_call is None)


__all__ = [
    "BaseChatModel",
    "DEFAULT_TOOL_CHOICE",
    "FRAMEWORK_KEYS",
    "IGNORED_KEYS",
    "LLM_REGISTRY",
    "ModelServiceError",
    "Settings",
    "ToolChoice",
    "Usage",
    "attempt_cfg",
    "check_cfg_keys",
    "choice_args",
    "register_llm",
    "split_generate_cfg",
    "truncate_messages",
]
