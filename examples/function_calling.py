"""Function calling with typed tools: the model asks, the agent runs the tool, the model answers.

    python examples/function_calling.py "What's the weather in Paris, in fahrenheit?"

Tools are plain typed functions: `@tool` builds the JSON Schema the model sees from the type hints
and the docstring. The model comes from the environment (see examples/basic_chat.py).
"""

from __future__ import annotations

import sys
from typing import Literal

from chatagent import FnCallAgent, tool

FORECASTS = {"paris": (18, "cloudy"), "rome": (24, "sunny"), "oslo": (6, "rain")}


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: Temperature unit.
    """
    temp, sky = FORECASTS.get(city.strip().lower(), (15, "clear"))
    if unit == "fahrenheit":
        temp = round(temp * 9 / 5 + 32)
    return f"{city}: {temp}°{'F' if unit == 'fahrenheit' else 'C'}, {sky}"


@tool(cache=True)
def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict:
    """Convert money between currencies at today's rate.

    Args:
        amount: How much money.
        from_currency: ISO code, e.g. "EUR".
        to_currency: ISO code, e.g. "USD".
    """
    rates = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0}
    rate = rates.get(to_currency.upper(), 1.0) / rates.get(from_currency.upper(), 1.0)
    return {"amount": round(amount * rate, 2), "currency": to_currency.upper()}


def main() -> None:
    question = " ".join(sys.argv[1:]) or "What's the weather in Paris, in fahrenheit?"
    bot = FnCallAgent(
        llm=None,  # from the environment: DASHSCOPE_API_KEY, OPENAI_API_KEY (+ base URL and model), or local
        function_list=[get_weather, convert_currency],
        system_message="You are a helpful assistant. Use the tools when they help.",
    )
    print(f"user: {question}")
    shown = 0
    response: list[dict] = []
    for response in bot.run([{"role": "user", "content": question}]):
        # print each message once it is complete: every one but the last is done
        for m in response[shown:-1]:
            _print(m)
        shown = max(shown, len(response) - 1)
    for m in response[shown:]:
        _print(m)


def _print(m: dict) -> None:
    if m.get("function_call"):
        call = m["function_call"]
        print(f"call: {call['name']}({call['arguments']})")
    elif m["role"] == "function":
        print(f"result: {m['content']}")
    elif m.get("content"):
        print(f"assistant: {m['content']}")


if __name__ == "__main__":
    main()
