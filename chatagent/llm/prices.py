"""What model calls cost: prices per million tokens for the Qwen and OpenAI families, and the usage of one call
counted with its price.

    from chatagent.llm.prices import PRICES, set_price
    set_price('my-finetune', input=0.5, output=1.5)           # US dollars per million tokens, for every call
    {'model': 'qwen-plus', 'generate_cfg': {'price': {'input': 0.4, 'output': 1.2}}}   # for one model config

A model's price is found by its name: exactly, else by the longest known name it starts with
(`gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`); a name with a provider prefix (`openai/gpt-4o`, Bedrock's
`us.anthropic.claude-sonnet-4-5-20250929-v1:0`) is looked up without it. Unknown models cost None, never a guess.
The table holds list prices as published (USD, standard tier), with the prompt cache's read and write prices where
the provider has them (tokens a cache served or wrote are priced at those), and ages: override what you pay with
`set_price` or `generate_cfg['price']` (`{'input', 'output', 'cache_read', 'cache_write'}`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, cast

from chatagent.llm.request import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens; input tokens read from and written to
    a provider's prompt cache at `cache_read` and `cache_write` (None: at the input price)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """The cost of a call; `cache_read` and `cache_write` are parts of `prompt_tokens`."""
        plain = prompt_tokens - cache_read - cache_write
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (plain * self.input + cache_read * read + cache_write * write + completion_tokens * self.output) / 1e6


#: model name (or the start of one) -> price; list prices, USD per million tokens
PRICES: dict[str, Price] = {
    # OpenAI (cache_read: the cached input price)
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025),
    "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-3.5-turbo": Price(0.5, 1.5),
    "o1": Price(15.0, 60.0, 7.5),
    "o1-mini": Price(1.1, 4.4, 0.55),
    "o3": Price(2.0, 8.0, 0.5),
    "o3-mini": Price(1.1, 4.4, 0.55),
    "o4-mini": Price(1.1, 4.4, 0.275),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.4, 0.005),
    "gpt-5.1": Price(1.25, 10.0, 0.125),
    # Anthropic (cache_write: the 5-minute cache's write price; also their names on Bedrock and Vertex)
    "claude-opus-4-5": Price(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.3),
    # Google Gemini (paid tier, prompts up to 200k tokens; cache_read: context caching's price)
    "gemini-3-pro": Price(2.0, 12.0, 0.2),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.125),
    "gemini-2.5-flash": Price(0.3, 2.5, 0.03),
    "gemini-2.5-flash-lite": Price(0.1, 0.4, 0.01),
    "gemini-2.0-flash": Price(0.1, 0.4, 0.025),
    "gemini-2.0-flash-lite": Price(0.075, 0.3),
    # Amazon Nova on Bedrock (on-demand; cache_read: prompt caching's read price)
    "nova-premier": Price(2.5, 12.5, 0.625),
    "nova-pro": Price(0.8, 3.2, 0.2),
    "nova-lite": Price(0.06, 0.24, 0.015),
    "nova-micro": Price(0.035, 0.14, 0.00875),
    # Qwen (Alibaba Cloud Model Studio, international)
    "qwen-max": Price(1.6, 6.4),
    "qwen-plus": Price(0.4, 1.2),
    "qwen-turbo": Price(0.05, 0.2),
    "qwen-flash": Price(0.05, 0.4),
    "qwen-long": Price(0.072, 0.287),
    "qwen-vl-max": Price(0.8, 3.2),
    "qwen-vl-plus": Price(0.21, 0.63),
    "qwen3-max": Price(1.2, 6.0),
    "qwen3-coder-plus": Price(1.0, 5.0),
    "qwen3-coder-flash": Price(0.3, 1.5),
    "qwq-plus": Price(0.8, 2.4),
    "qwen2.5-72b-instruct": Price(1.4, 5.6),
    "qwen2.5-32b-instruct": Price(0.7, 2.8),
    "qwen2.5-14b-instruct": Price(0.35, 1.4),
    "qwen2.5-7b-instruct": Price(0.175, 0.7),
    "qwen3-235b-a22b": Price(0.7, 2.8),
    "qwen3-32b": Price(0.7, 2.8),
    "qwen3-30b-a3b": Price(0.2, 0.8),
    "qwen3-14b": Price(0.35, 1.4),
    "qwen3-8b": Price(0.18, 0.7),
}
_lock = threading.Lock()
_found: dict[str, Price | None] = {}  # lookups by name, forgotten when a price is set


def set_price(
    model: str,
    *,
    input: float,  # noqa: A002 (the price's own words)
    output: float,
    cache_read: float | None = None,
    cache_write: float | None = None,
) -> None:
    """Price `model` (and the names that start with it) at `input` and `output` US dollars per million tokens, and
    the prompt cache's reads and writes at `cache_read` and `cache_write` (None: at the input price)."""
    if not model:
        raise ValueError("set_price needs a model name")
    given = {"input": input, "output": output, "cache_read": cache_read, "cache_write": cache_write}
    price = checked_price({k: v for k, v in given.items() if v is not None})
    with _lock:
        PRICES[model] = price
        _found.clear()


def checked_price(value: Any) -> Price:
    """`value` ({'input': x, 'output': y} in USD per million tokens, or a Price) as a Price; ValueError if not."""
    if isinstance(value, Price):
        return value
    if isinstance(value, dict):
        parts = cast("dict[str, object]", value)
        numbers = {k: v for k, v in parts.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0}
        if set(parts) == set(numbers) and {"input", "output"} <= set(numbers) <= _PRICE_KEYS:
            return Price(**{k: float(v) for k, v in numbers.items()})
    raise ValueError(
        "a price is {'input': dollars, 'output': dollars} per million tokens (>= 0), with 'cache_read' and "
        f"'cache_write' if you like, got {value!r:.80}"
    )


_PRICE_KEYS = {"input", "output", "cache_read", "cache_write"}


def price_of(model: str) -> Price | None:
    """The price of `model` by the table (see the module docstring), or None."""
    try:
        return _found[model]
    except KeyError:
        pass
    name = bare_model_name(model)
    with _lock:
        found = PRICES.get(name)
        if found is None:
            best = max((k for k in PRICES if name.startswith(k)), key=len, default=None)
            found = PRICES[best] if best is not None else None
        _found[model] = found
    return found


# Bedrock's model ids: an inference profile's region ('us.', 'global.') and the vendor ('anthropic.', 'amazon.')
_BEDROCK_PREFIX = re.compile(
    r"^(?:(?:us|eu|apac|au|ca|jp|us-gov|global)\.)?(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|openai|qwen)\."
)


def bare_model_name(model: str) -> str:
    """A model's name as the tables know it: lower case, without a provider path ('openai/gpt-4o',
    'publishers/google/models/gemini-2.5-pro') or Bedrock's prefixes ('us.anthropic.claude-sonnet-4-5-...')."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return _BEDROCK_PREFIX.sub("", name)


class PricedUsage(Usage):
    """The usage of one call to a model whose price is known: what the backend counts goes to `parent` with its
    cost (and is kept here too)."""

    def __init__(self, parent: Usage, price: Price) -> None:
        super().__init__()
        self.parent = parent
        self.price = price

    def add(
        self,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float | None = None,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        if cost is None:
            cost = self.price.cost(prompt_tokens or 0, completion_tokens or 0, cache_read_tokens, cache_write_tokens)
        cache = {"cache_read_tokens": cache_read_tokens, "cache_write_tokens": cache_write_tokens}
        super().add(prompt_tokens, completion_tokens, cost, **cache)
        self.parent.add(prompt_tokens, completion_tokens, cost, **cache)


__all__ = ["PRICES", "Price", "PricedUsage", "bare_model_name", "checked_price", "price_of", "set_price"]
