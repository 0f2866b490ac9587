"""What model calls cost: prices per million tokens for the Qwen and OpenAI families, and the usage of one call
counted with its price.

    from chatagent.llm.prices import PRICES, set_price
    set_price('my-finetune', input=0.5, output=1.5)           # US dollars per million tokens, for every call
    {'model': 'qwen-plus', 'generate_cfg': {'price': {'input': 0.4, 'output': 1.2}}}   # for one model config

A model's price is found by its name: exactly, else by the longest known name it starts with
(`gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`); a name with a provider prefix (`openai/gpt-4o`) is looked up
without it. Unknown models cost None, never a guess. The table holds list prices as published (USD, standard tier,
no cache discounts) and ages: override what you pay with `set_price` or `generate_cfg['price']`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, cast

from chatagent.llm.request import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


#: model name (or the start of one) -> price; list prices, USD per million tokens
PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-4o": Price(2.5, 10.0),
    "gpt-4o-mini": Price(0.15, 0.6),
    "gpt-4.1": Price(2.0, 8.0),
    "gpt-4.1-mini": Price(0.4, 1.6),
    "gpt-4.1-nano": Price(0.1, 0.4),
    "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-3.5-turbo": Price(0.5, 1.5),
    "o1": Price(15.0, 60.0),
    "o1-mini": Price(1.1, 4.4),
    "o3": Price(2.0, 8.0),
    "o3-mini": Price(1.1, 4.4),
    "o4-mini": Price(1.1, 4.4),
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    "gpt-5-nano": Price(0.05, 0.4),
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


def set_price(model: str, *, input: float, output: float) -> None:  # noqa: A002 (the price's own words)
    """Price `model` (and the names that start with it) at `input` and `output` US dollars per million tokens."""
    if not model:
        raise ValueError("set_price needs a model name")
    price = checked_price({"input": input, "output": output})
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
        if set(parts) == set(numbers) == {"input", "output"}:
            return Price(float(numbers["input"]), float(numbers["output"]))
    raise ValueError(f"a price is {{'input': dollars, 'output': dollars}} per million tokens (>= 0), got {value!r:.80}")


def price_of(model: str) -> Price | None:
    """The price of `model` by the table (see the module docstring), or None."""
    try:
        return _found[model]
    except KeyError:
        pass
    name = model.lower().rsplit("/", 1)[-1]
    with _lock:
        found = PRICES.get(name)
        if found is None:
            best = max((k for k in PRICES if name.startswith(k)), key=len, default=None)
            found = PRICES[best] if best is not None else None
        _found[model] = found
    return found


class PricedUsage(Usage):
    """The usage of one call to a model whose price is known: what the backend counts goes to `parent` with its
    cost (and is kept here too)."""

    def __init__(self, parent: Usage, price: Price) -> None:
        super().__init__()
        self.parent = parent
        self.price = price

    def add(self, prompt_tokens: int = 0, completion_tokens: int = 0, cost: float | None = None) -> None:
        if cost is None:
            cost = self.price.cost(prompt_tokens or 0, completion_tokens or 0)
        super().add(prompt_tokens, completion_tokens, cost)
        self.parent.add(prompt_tokens, completion_tokens, cost)


__all__ = ["PRICES", "Price", "PricedUsage", "checked_price", "price_of", "set_price"]
