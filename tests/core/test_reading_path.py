"""What a newcomer reads to follow one turn: FnCallAgent, one tool call, the OpenAI-compatible backend, cumulative
output. The functions of chatagent that the turn runs (seen by a profiler, in every thread) are what one reads. Of
those, the run machinery's (the agent, run/, how fragments add up, the one tool-call path: `RUN_MACHINERY`) stay
within a budget of lines, and none of them is Qwen-Agent compatibility code (run/compat.py). The whole path (the
backend, messages, validation, helpers too) is printed beside it.

    .venv/bin/python -m tests.core.test_reading_path        # prints the files in reading order, with their lines
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from chatagent import FnCallAgent, tool
from tests.support.openai_server import OpenAIServer, Reply

PACKAGE = Path(__file__).resolve().parents[2] / "chatagent"
BUDGET = 800  # lines of the run machinery one turn runs (856 before the Stage step, 818 after it; 923 after this
# stop's merges: the run's trust and provenance on its context (issue 36), interrupts and the event stream's switch
# (issue 39), streamed tool-call arguments (issue 38), traces; 863 with rare branches off the path, 862 after the
# nested questions merged; 800 with a tool call's rare branches off it (arguments given as data, max_calls, the
# response cache's claim, a timeout's thread) and a fragment's rare changes; 847 before the run wing; issue 42 asks
# for 820)
RUN_MACHINERY = ("agent.py", "agents/", "run/", "schema/stream.py", "schema/fragment.py", "tools/calling.py")
COMPAT = PACKAGE / "run" / "compat.py"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


def _function_lines(code: CodeType) -> int:
    """The lines of the function `code` is, as written (its whole definition, decorators and docstring included)."""
    try:
        lines, _ = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return 0
    return len(lines)


def turn_functions(server: OpenAIServer) -> set[CodeType]:
    """The code objects of chatagent's functions that one tool-calling turn runs."""
    server.add(Reply(tool_calls=[("weather", {"city": "Oslo"})]))
    server.add("It is sunny in Oslo.")
    llm = {"model": "m", "model_server": server.base_url, "api_key": "k"}
    bot = FnCallAgent(llm=llm, function_list=[weather])
    seen: set[CodeType] = set()
    root = str(PACKAGE)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            seen.add(frame.f_code)

    list(bot.run([{"role": "user", "content": "Weather in Oslo?"}]))  # warm: imports and first-use setup
    server.add(Reply(tool_calls=[("weather", {"city": "Oslo"})]))
    server.add("It is sunny in Oslo.")
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        response = list(bot.run([{"role": "user", "content": "Weather in Oslo?"}]))[-1]
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert response[-1]["content"] == "It is sunny in Oslo."
    return seen


def by_file(codes: set[CodeType]) -> dict[str, int]:
    """Lines read per file, counting each function once (nested functions are inside their parent's lines).

    Comprehensions, generator expressions and lambdas are inside the function that holds them: they are not
    functions of their own here (their source lines, as `inspect` finds them, would run on past their end and hide
    the functions after them)."""
    codes = {c for c in codes if not c.co_name.startswith("<")}
    outer: set[CodeType] = set()
    for code in codes:
        parents = [
            c
            for c in codes
            if c is not code
            and c.co_filename == code.co_filename
            and c.co_firstlineno < code.co_firstlineno
            and code.co_firstlineno < c.co_firstlineno + _function_lines(c)
        ]
        if not parents:
            outer.add(code)
    files: dict[str, int] = {}
    for code in outer:
        name = str(Path(code.co_filename).relative_to(PACKAGE))
        files[name] = files.get(name, 0) + _function_lines(code)
    return files


def test_one_turn_reads_within_the_budget_and_no_compat_code(openai_server: OpenAIServer) -> None:
    codes = turn_functions(openai_server)
    assert not [c.co_name for c in codes if Path(c.co_filename) == COMPAT], "a fragment-native turn ran compat code"
    files = run_machinery(by_file(codes))
    assert sum(files.values()) <= BUDGET, files


def run_machinery(files: dict[str, int]) -> dict[str, int]:
    return {name: n for name, n in files.items() if name.startswith(RUN_MACHINERY)}


def _main() -> Iterator[str]:
    with OpenAIServer().start() as server:
        files = by_file(turn_functions(server))
    machinery = run_machinery(files)
    for name, lines in sorted(files.items(), key=lambda kv: kv[0]):
        yield f"{lines:5d}  {name}{'  (run machinery)' if name in machinery else ''}"
    yield f"{sum(machinery.values()):5d}  run machinery, in {len(machinery)} files (budget {BUDGET})"
    yield f"{sum(files.values()):5d}  the whole path, in {len(files)} files"


if __name__ == "__main__":
    print("\n".join(_main()))
