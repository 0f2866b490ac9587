"""chatagent's side of bench/peers.py (see bench/_peer_run.py): BasicAgent / FnCallAgent, run() and arun()."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this worktree's chatagent

from chatagent import BasicAgent, FnCallAgent  # noqa: E402

IMPORT = "from chatagent import BasicAgent, FnCallAgent; import chatagent.llm.openai.chat"
QUESTION = [{"role": "user", "content": "Tell me a long story."}]


def version() -> str:
    import subprocess

    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    )
    return f"chatagent {head.stdout.strip() or '?'}"


def _llm(url: str, model: str) -> dict:
    return {"model": model, "model_server": url, "api_key": "bench"}


def stream(url: str, model: str) -> Callable[[], str]:
    bot = BasicAgent(llm=_llm(url, model))

    def run() -> str:
        return "".join(m["content"] for delta in bot.run(QUESTION, delta_stream=True) for m in delta)

    return run


def astream(url: str, model: str) -> Callable[[], AsyncIterator[str]]:
    bot = BasicAgent(llm=_llm(url, model))

    async def run() -> AsyncIterator[str]:
        async for delta in bot.arun(QUESTION, delta_stream=True):
            for m in delta:
                yield m["content"]

    return run


def tool_loop(url: str, tools: list[Callable[..., str]], model: str = "tools") -> Callable[[], str]:
    bot = FnCallAgent(llm=_llm(url, model), function_list=tools, max_llm_calls=1000)

    def run() -> str:
        return bot.run_nonstream([{"role": "user", "content": "Please look these up for me."}])[-1]["content"]

    return run


def atool_loop(url: str, tools: list[Callable[..., str]], model: str = "tools") -> Callable[[], Awaitable[str]]:
    bot = FnCallAgent(llm=_llm(url, model), function_list=tools, max_llm_calls=1000)

    async def run() -> str:
        return (await bot.arun_nonstream([{"role": "user", "content": "Please look these up for me."}]))[-1]["content"]

    return run
