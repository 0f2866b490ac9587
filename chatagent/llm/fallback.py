"""FallbackModel: several models asked in order, per call, so that one model's outage does not stop a run.

    bot = Assistant(llm=[{'model': 'qwen-max'}, {'model': 'gpt-4o-mini', 'model_server': 'openai'}])
    llm = FallbackModel([primary_cfg, backup_cfg])             # the same, as a model object

Each call goes to the first model, with that model's own retries; when it fails for good (a failure that is not
retryable, or its retries are used up: a `ModelServiceError`), the same call goes to the next one, and so on; the
last one's error is raised. A streamed reply that has already sent something is never restarted on another model
(the caller would see two answers run together): its error is raised, marked `partial=True`. Each model keeps its
own settings (retries, `max_rpm`, prices, the response cache, tool calling native or by prompt, its window).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, cast

from chatagent.errors import ModelServiceError
from chatagent.llm.base import BaseChatModel
from chatagent.llm.registry import get_chat_model
from chatagent.llm.request import Usage
from chatagent.utils.tokens import Tokenizer

logger = logging.getLogger("chatagent.llm")


class FallbackModel(BaseChatModel):
    """Models asked in order, per call (see the module docstring). `models`: configs or model objects, at least
    one (a config dict `{'models': [...]}` works too, for `get_chat_model`)."""

    model_type = "fallback"
    cfg_keys = frozenset({"models"})

    def __init__(self, models: Sequence[Any] | dict[str, Any]) -> None:
        listed: Any = models.get("models") if isinstance(models, dict) else models
        if isinstance(listed, (str, bytes, dict, BaseChatModel)) or not isinstance(listed, Iterable):
            raise TypeError("FallbackModel takes a list of model configs or models")
        members = [get_chat_model(m) for m in cast("Iterable[Any]", listed)]
        if not members:
            raise ValueError("FallbackModel needs at least one model")
        super().__init__({"model": members[0].model})
        self.models = members
        self.support_multimodal_input = all(m.support_multimodal_input for m in members)

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(map(repr, self.models))})"

    # ---- the call -------------------------------------------------------------------------------------------------

    def chat(  # pyright: ignore[reportIncompatibleMethodOverride] (the same call, answered by each model in turn)
        self,
        messages: Iterable[Any],
        functions: Iterable[Any] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> Any:
        given, funcs, options = _call(messages, functions, extra_generate_cfg, usage, deadline)
        if not stream:
            return self._whole(given, funcs, options)
        return self._stream(given, funcs, delta_stream, options)

    def _whole(self, messages: list[Any], funcs: list[Any] | None, options: dict[str, Any]) -> Any:
        for k, model in enumerate(self.models):
            try:
                return model.chat(messages, funcs, stream=False, **options)
            except ModelServiceError as e:
                self._next(k, e, sent=False)
        raise AssertionError("unreachable: the last model's error is raised")

    def _stream(
        self, messages: list[Any], funcs: list[Any] | None, delta: bool, options: dict[str, Any]
    ) -> Iterator[Any]:
        for k, model in enumerate(self.models):
            sent = False
            try:
                for out in model.chat(messages, funcs, stream=True, delta_stream=delta, **options):
                    sent = True
                    yield out
                return
            except ModelServiceError as e:
                self._next(k, e, sent)

    def achat(  # pyright: ignore[reportIncompatibleMethodOverride] (as chat)
        self,
        messages: Iterable[Any],
        functions: Iterable[Any] | None = None,
        stream: bool = True,
        delta_stream: bool = False,
        extra_generate_cfg: dict[str, Any] | None = None,
        *,
        usage: Usage | None = None,
        deadline: float | None = None,
    ) -> Any:
        given, funcs, options = _call(messages, functions, extra_generate_cfg, usage, deadline)
        if not stream:
            return self._awhole(given, funcs, options)
        return self._astream(given, funcs, delta_stream, options)

    async def _awhole(self, messages: list[Any], funcs: list[Any] | None, options: dict[str, Any]) -> Any:
        for k, model in enumerate(self.models):
            try:
                return await model.achat(messages, funcs, stream=False, **options)
            except ModelServiceError as e:
                self._next(k, e, sent=False)
        raise AssertionError("unreachable: the last model's error is raised")

    async def _astream(
        self, messages: list[Any], funcs: list[Any] | None, delta: bool, options: dict[str, Any]
    ) -> AsyncIterator[Any]:
        for k, model in enumerate(self.models):
            sent = False
            parts: AsyncIterator[Any] = model.achat(messages, funcs, stream=True, delta_stream=delta, **options)
            try:
                async for out in parts:
                    sent = True
                    yield out
                return
            except ModelServiceError as e:
                self._next(k, e, sent)
            finally:
                aclose = getattr(parts, "aclose", None)
                if aclose is not None:
                    await aclose()

    def _next(self, k: int, e: ModelServiceError, sent: bool) -> None:
        """After model `k` failed with `e`: raise it (the last model, or a reply already under way), else say which
        model is asked next."""
        if sent or e.partial:
            e.partial = True
            raise e
        if k + 1 >= len(self.models):
            raise e
        logger.warning("%r failed (%s): asking %r instead", self.models[k], e, self.models[k + 1])

    # ---- budgets: the smallest window of them all ---------------------------------------------------------------

    @property
    def context_window(self) -> int | None:
        windows = [w for w in (m.context_window for m in self.models) if w]
        return min(windows) if windows else None

    def input_limit(self, extra_generate_cfg: dict[str, Any] | None = None) -> int:
        return min(m.input_limit(extra_generate_cfg) for m in self.models)

    def _make_tokenizer(self) -> Tokenizer:
        return self.models[0].tokenizer


__all__ = ["FallbackModel"]


def _call(
    messages: Iterable[Any],
    functions: Iterable[Any] | None,
    extra_generate_cfg: dict[str, Any] | None,
    usage: Usage | None,
    deadline: float | None,
) -> tuple[list[Any], list[Any] | None, dict[str, Any]]:
    """One call as every model of the chain gets it: the messages and functions as lists (each model reads them
    again), and the keyword options."""
    funcs = list(functions) if functions is not None else None
    return list(messages), funcs, {"extra_generate_cfg": extra_generate_cfg, "usage": usage, "deadline": deadline}
