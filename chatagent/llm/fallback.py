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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from chatagent.errors import ModelServiceError
from chatagent.llm.base import BaseChatModel
from chatagent.llm.pumps import Failed, aplayed, closing_stream, first_answer, played
from chatagent.llm.registry import get_chat_model
from chatagent.llm.request import Usage
from chatagent.utils.tokens import Tokenizer

logger = logging.getLogger("chatagent.llm")
_S = TypeVar("_S")
_T = TypeVar("_T")


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
            return next(played(first_answer(*self._in_turn(lambda m: [m.chat(given, funcs, stream=False, **options)]))))
        return played(
            first_answer(
                *self._in_turn(lambda m: m.chat(given, funcs, stream=True, delta_stream=delta_stream, **options))
            )
        )

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
            return _first(
                aplayed(
                    first_answer(*self._in_turn(lambda m: _awaited(m.achat(given, funcs, stream=False, **options))))
                )
            )
        return aplayed(
            first_answer(
                *self._in_turn(lambda m: m.achat(given, funcs, stream=True, delta_stream=delta_stream, **options))
            )
        )

    def _in_turn(self, ask: Callable[[BaseChatModel], _S]) -> tuple[Callable[[], _S], Failed[_S]]:
        """How `first_answer` asks the models in turn: the first model's answer (`ask(model)`), and after model `k`
        failed, the next one's (`_next` raises when there is none, or the failed answer had started)."""
        k = 0

        def failed(e: ModelServiceError, sent: bool) -> Callable[[], _S]:
            nonlocal k
            self._next(k, e, sent)
            k += 1
            return lambda: ask(self.models[k])

        return lambda: ask(self.models[0]), failed

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


async def _awaited(answer: Awaitable[_T]) -> AsyncIterator[_T]:
    """An awaited answer as a stream of one item."""
    yield await answer


async def _first(stream: AsyncIterator[_T]) -> _T:
    """The first item of `stream` (closed then)."""
    async with closing_stream(stream) as items:
        async for item in items:
            return item
    raise AssertionError("unreachable: the last model's error is raised")
