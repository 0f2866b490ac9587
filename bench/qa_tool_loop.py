"""Qwen-Agent's side of bench/tool_loop.py; runs in the Qwen-Agent venv (see bench/_qwen_agent.py).

    python qa_tool_loop.py SPEC.json

SPEC.json (written by bench/tool_loop.py): {"schema", "runs", "repeats", "round_trips", "parse_n", "valid",
"malformed"}. Measured as ours is:
(a) Qwen-Agent's FnCallAgent with 20 no-op tools (BaseTool subclasses that validate their arguments, as its
    tools do) over a scripted model with no I/O: runs of `round_trips` tool round trips and a final answer,
    CPU time of this process. The model replies in Qwen-Agent's default function-calling format (the `nous`
    <tool_call> template, which its OpenAI-compatible backend uses), each reply as ONE chunk (the most
    favourable case for it; a real server streams it token by token and Qwen-Agent re-parses every chunk).
    `total_us` is everything per round trip; `framework_us` subtracts, as ours does, the very same model
    calls replayed straight on a fresh model (`model.chat()`, which in Qwen-Agent includes its prompt
    formatting and reply parsing). Also 4 parallel calls per reply (parallel_function_calls=True).
(b) Qwen-Agent's own argument handling, BaseTool._verify_json_format_args (json, then json5, then
    jsonschema validation), on the same corpus of call strings; how many malformed ones it accepts.
Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import qa_common

qa_common.guard()

from qwen_agent.agents import FnCallAgent  # noqa: E402
from qwen_agent.llm.function_calling import BaseFnCallModel  # noqa: E402
from qwen_agent.llm.schema import ASSISTANT, Message  # noqa: E402
from qwen_agent.tools.base import BaseTool  # noqa: E402

USER = [{"role": "user", "content": "Please look these up for me."}]


class ScriptModel(BaseFnCallModel):
    """Replies from a list of texts, in order, each as one chunk; records every chat() call it receives."""

    def __init__(self, replies: list[str], parallel: bool) -> None:
        super().__init__({"model": "script", "generate_cfg": {"parallel_function_calls": parallel}})
        self.replies = list(replies)
        self.calls: list[tuple[list, list | None]] = []

    def chat(self, messages, functions=None, stream=True, delta_stream=False, extra_generate_cfg=None):  # noqa: ANN001, ANN201
        self.calls.append((list(messages), functions, extra_generate_cfg))  # the agent grows its list later
        return super().chat(messages, functions, stream, delta_stream, extra_generate_cfg)

    def _chat_stream(self, messages: list[Message], delta_stream: bool, generate_cfg: dict) -> Iterator[list[Message]]:
        yield [Message(role=ASSISTANT, content=self.replies.pop(0))]

    def _chat_no_stream(self, messages: list[Message], generate_cfg: dict) -> list[Message]:
        return [Message(role=ASSISTANT, content=self.replies.pop(0))]


def make_tools(schema: dict, n: int = 20) -> list[BaseTool]:
    tools = []
    for i in range(n):

        class Lookup(BaseTool):
            name = f"lookup_{i}"
            description = "Look something up."
            parameters = schema

            def call(self, params: str | dict, **kwargs: object) -> str:
                self._verify_json_format_args(params)
                return "ok"

        tools.append(Lookup())
    return tools


def script(round_trips: int, parallel: int) -> list[str]:
    replies = []
    for r in range(round_trips):
        calls = [
            {"name": f"lookup_{(r + k) % 20}", "arguments": {"query": f"item {r}-{k}", "limit": 3}}
            for k in range(parallel)
        ]
        replies.append("\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls))
    replies.append("Here is what I found.")
    return replies


def round_trip(spec: dict, parallel: int) -> dict:
    runs, repeats, rt = spec["runs"], spec["repeats"], spec["round_trips"]
    items = script(rt, parallel) * runs
    models = [ScriptModel(items, parallel > 1) for _ in range(repeats + 1)]
    agents = [FnCallAgent(llm=m, function_list=make_tools(spec["schema"])) for m in models]

    def loop(agent: FnCallAgent) -> None:
        for _ in range(runs):
            out = agent.run_nonstream(USER)
            assert out[-1]["content"] == "Here is what I found.", out[-1]
            assert sum(1 for m in out if m["role"] == "function") == rt * parallel, out

    loop(agents[-1])  # warm up
    total = min(qa_common.best(lambda a=a: loop(a), 1, time.process_time) for a in agents[:repeats])
    recorded = models[0].calls

    def replay() -> None:
        model = ScriptModel(items, parallel > 1)
        for messages, functions, cfg in recorded:
            for _ in model.chat(messages, functions, stream=True, extra_generate_cfg=cfg):
                pass

    model_share = qa_common.best(replay, repeats, time.process_time)
    per = runs * rt
    return {"total_us": total / per * 1e6, "framework_us": (total - model_share) / per * 1e6}


def parse_rates(spec: dict) -> dict:
    tool = make_tools(spec["schema"], 1)[0]
    out: dict = {}
    for label in ("valid", "malformed"):
        corpus, n = spec[label], spec["parse_n"]

        def go(corpus: list[str] = corpus, n: int = n) -> None:
            for _ in range(n):
                for text in corpus:
                    try:
                        tool._verify_json_format_args(text)
                    except Exception:  # noqa: BLE001 - ValueError, jsonschema's ValidationError, ...
                        pass

        out[f"{label}_per_s"] = n * len(corpus) / qa_common.best(go, spec["repeats"], time.process_time)
    accepted = 0
    for text in spec["malformed"]:
        try:
            tool._verify_json_format_args(text)
            accepted += 1
        except Exception:  # noqa: BLE001, S112
            continue
    out["malformed_accepted"] = accepted
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    result = {"single": round_trip(spec, 1), "parallel4": round_trip(spec, 4), "parse": parse_rates(spec)}
    qa_common.emit(result)


if __name__ == "__main__":
    main()
