"""Parallel tool calls: when the model asks for several tools at once, they run concurrently.

    python examples/parallel_tools.py "Compare the weather in Paris, Rome and Oslo."

Each lookup below takes half a second (think of a slow web API); three of them finish in about half
a second in total, and their results still come back in the order the model asked. A callback
prints each tool's duration as it ends.
"""

from __future__ import annotations

import sys
import time

from chatagent import Event, FnCallAgent, tool

FORECASTS = {"paris": "18°C, cloudy", "rome": "24°C, sunny", "oslo": "6°C, rain"}


@tool(timeout=10)
def slow_weather(city: str) -> str:
    """Current weather for a city (a slow service).

    Args:
        city: City name.
    """
    time.sleep(0.5)
    return f"{city}: {FORECASTS.get(city.strip().lower(), '15°C, clear')}"


def on_event(event: Event) -> None:
    if event.kind == "tool_end":
        status = "failed" if event.error else "ok"
        print(f"  [{event.tool} {event.arguments} {status} in {event.duration:.2f}s]")


def main() -> None:
    question = " ".join(sys.argv[1:]) or "Compare the weather in Paris, Rome and Oslo."
    bot = FnCallAgent(
        llm=None,
        function_list=[slow_weather],
        system_message="Call tools in parallel when you need several independent results.",
        callbacks=[on_event],
        max_parallel_tools=8,
    )
    print(f"user: {question}")
    start = time.perf_counter()
    run = bot.run([{"role": "user", "content": question}])
    response = list(run)[-1]  # iterate the run to the end; run.usage then holds the whole run's tokens
    elapsed = time.perf_counter() - start
    calls = sum(1 for m in response if m["role"] == "function")
    print(f"assistant: {response[-1]['content']}")
    print(f"{calls} tool calls, {run.usage.calls} model calls, {elapsed:.2f}s in all")


if __name__ == "__main__":
    main()
