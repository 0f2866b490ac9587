"""llama.cpp's own tokenizer for a served model (`LlamaTokenizer`), through the server's /tokenize: what the embedded
model's budgets count with (see `chatagent.llm.local`)."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from chatagent.errors import ModelServiceError
from chatagent.llm.budget import MESSAGE_OVERHEAD
from chatagent.utils.tokens import Tokenizer

logger = logging.getLogger("chatagent.llm.local")


class TokenizingServer(Protocol):
    """What the tokenizer needs of a llama.cpp server (`chatagent.llm.local.LocalServer` has it)."""

    path: str

    def tokenize(self, content: str | list[str | int]) -> list[int]: ...

    def apply_template(self, messages: list[dict[str, Any]]) -> str: ...

    def props(self) -> dict[str, Any]: ...


class LlamaTokenizer(Tokenizer):
    """llama.cpp's own tokenizer for a served model, through the server's /tokenize.

    `count_many` asks once for many texts (separated by the end-of-text token); counts are cached, so
    the same excerpt or system message is sent once.
    """

    exact = True
    CACHE_SIZE = 2048

    def __init__(self, server: TokenizingServer) -> None:
        self.server = server
        self.name = os.path.basename(server.path)
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        known: dict[str, int] = {"": 0}
        with self._lock:
            for t in texts:
                n = self._cache.get(t) if t else None
                if n is not None:
                    self._cache.move_to_end(t)
                    known[t] = n
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            found = dict(zip(missing, self._tokenize_counts(missing), strict=True))
            with self._lock:
                self._cache.update(found)
                while len(self._cache) > self.CACHE_SIZE:
                    self._cache.popitem(last=False)
            known.update(found)
        return [known[t] for t in texts]

    def _tokenize_counts(self, texts: list[str]) -> list[int]:
        sep = self._separator
        if sep is None or len(texts) == 1:
            return [len(self.server.tokenize(t)) for t in texts]
        content: list[str | int] = []
        for t in texts:
            content += [t, sep]
        ids = self.server.tokenize(content[:-1])
        counts: list[int] = []
        n = 0
        for i in ids:
            if i == sep:
                counts.append(n)
                n = 0
            else:
                n += 1
        counts.append(n)
        if len(counts) != len(texts):  # a text held the separator itself: ask one by one
            return [len(self.server.tokenize(t)) for t in texts]
        return counts

    @functools.cached_property
    def prompt_overhead(self) -> int:
        """What the chat template adds to a prompt beyond each message's markers (a default system message,
        the reply's opening), measured once on a one-message prompt."""
        try:
            prompt = self.server.apply_template([{"role": "user", "content": "x"}])
        except ModelServiceError as e:
            logger.warning("could not measure the chat template's overhead (%s): assuming %d tokens", e,
                           Tokenizer.prompt_overhead)  # fmt: skip
            return Tokenizer.prompt_overhead
        return max(Tokenizer.prompt_overhead, self.count(prompt) - self.count("x") - MESSAGE_OVERHEAD)

    @functools.cached_property
    def _separator(self) -> int | None:
        """The end-of-text token that separates texts counted at once (None: the model has no single-token one)."""
        eos: str = self.server.props().get("eos_token") or ""
        ids = self.server.tokenize(eos) if eos else []
        return ids[0] if len(ids) == 1 else None


__all__ = ["LlamaTokenizer", "TokenizingServer"]
