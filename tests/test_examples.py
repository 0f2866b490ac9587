"""Every examples/*.py runs, as a subprocess, against the loopback OpenAI-compatible server.

The environment is OPENAI_API_KEY=test, OPENAI_BASE_URL=<the loopback server>, OPENAI_MODEL=test-model,
and no DASHSCOPE_API_KEY, so an example that takes its model from `default_llm_config()` talks to the
server. An example without an entry in EXAMPLES fails the test: examples never rot.

To add your example, add one entry to EXAMPLES (the server's replies in order, see
tests/support/openai_server.py; the command-line args; substrings the output must contain):

    "my_example.py": Case(replies=["Hello!"], args=["hi"], expect=["Hello!"]),

Optional: `stdin` (text fed to the example), `env` (extra variables), `timeout` (seconds, default 60),
`use_all=False` when the example may not use every scripted reply.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.openai_server import Reply

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    replies: list = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)
    stdin: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 60
    use_all: bool = True


EXAMPLES: dict[str, Case] = {
    "guarded_agent.py": Case(
        replies=[
            Reply(tool_calls=[("send_money", {"to": "Bob", "amount": 150})]),
            Reply(text="Done: 150 EUR went to Bob.", chunk_size=4),
        ],
        args=["Pay Bob 150 euros from my card 4111 1111 1111 1111."],
        stdin="y\n",
        expect=[
            'approve send_money({"to": "Bob", "amount": 150})? [y/N]',
            "[send_money] sent 150 EUR to Bob",
            "assistant: Done: 150 EUR went to Bob.",
        ],
    ),
    "basic_chat.py": Case(
        replies=[Reply(text="Paris is the capital of France.", chunk_size=3)],
        args=["What is the capital of France?"],
        expect=["user: What is the capital of France?", "assistant: Paris is the capital of France."],
    ),
    "llm_direct.py": Case(
        replies=[Reply(text="Tokens flow like streams", chunk_size=2), "Les jetons coulent"],
        expect=["streaming:\nTokens flow like streams\n", "non-streaming:\nLes jetons coulent", "2 calls"],
    ),
    "function_calling.py": Case(
        replies=[
            Reply(tool_calls=[("get_weather", {"city": "Paris", "unit": "fahrenheit"})]),
            Reply(tool_calls=[("convert_currency", '{"amount": "100", "from_currency": "eur", "to_currency": "usd"}')]),
            Reply(text="It is 64°F and cloudy in Paris; 100 EUR is 108 USD.", chunk_size=5),
        ],
        args=["Weather in Paris in fahrenheit, and 100 EUR in USD?"],
        expect=[
            'call: get_weather({"city": "Paris", "unit": "fahrenheit"})',
            "result: Paris: 64°F, cloudy",
            'result: {"amount": 108.0, "currency": "USD"}',
            "assistant: It is 64°F and cloudy in Paris; 100 EUR is 108 USD.",
        ],
    ),
    "code_interpreter.py": Case(
        replies=[
            Reply(
                tool_calls=[("code_interpreter", {"code": "a, b = 0, 1\nfor _ in range(30):\n    a, b = b, a + b\na"})]
            ),
            Reply(tool_calls=[("code_interpreter", {"code": "print(a * 2)"})]),
            Reply(text="The 30th Fibonacci number is 832040."),
        ],
        expect=[
            "result:\nresult:\n832040",
            "result:\nstdout:\n1664080",
            "assistant: The 30th Fibonacci number is 832040.",
        ],
    ),
    "parallel_tools.py": Case(
        replies=[
            Reply(tool_calls=[("slow_weather", {"city": c}) for c in ("Paris", "Rome", "Oslo")]),
            Reply(text="Rome is warmest, Oslo is rainy."),
        ],
        expect=[
            "[slow_weather",
            "ok in 0.5",
            "assistant: Rome is warmest, Oslo is rainy.",
            "3 tool calls, 2 model calls",
        ],
    ),
    "structured_output.py": Case(
        replies=[
            Reply(text='{"name": "Marie Curie", "born": "eighteen sixty-seven", "fields": ["physics"]}'),
            Reply(
                text='```json\n{"name": "Marie Curie", "born": 1867, "fields": ["physics", "chemistry"], "nobel_prizes": 2}\n```'
            ),
        ],
        expect=["name: Marie Curie", "born: 1867", "fields: physics, chemistry", "nobel prizes: 2"],
    ),
    "react_tools.py": Case(
        replies=[
            Reply(text='Thought: I need the population.\n**Action:** population\nAction Input: {"city": "Oslo"}'),
            Reply(text="Thought: Now 17% of it.\nAction: Calculate\nAction Input: 709000 * 0.17", chunk_size=2),
            Reply(text="Thought: I now know the final answer.\nFinal Answer: About 120,530 people.", chunk_size=3),
        ],
        args=["What is 17% of the population of Oslo?"],
        expect=[
            'action: population({"city": "Oslo"})',
            "observation: Oslo: 709000 inhabitants",
            'action: calculate({"expression": "709000 * 0.17"})',
            "observation: 120530.0",
            "thought: I now know the final answer.",
            "answer: About 120,530 people.",
        ],
    ),
    "router.py": Case(
        replies=[Reply(text="Call: translator\n"), Reply(text="Bonjour le monde.", chunk_size=3)],
        args=["Translate 'hello world' into French."],
        expect=["translator: Bonjour le monde."],
    ),
    "crew_report.py": Case(
        replies=[Reply(text="- Rhine barge traffic +8% in Q3", chunk_size=5), Reply(text="Traffic recovered.")],
        expect=[
            "crew: Task 1/2 (analyst)",
            "analyst: - Rhine barge traffic +8% in Q3",
            "crew: Task 2/2 (writer)",
            "writer: Traffic recovered.",
        ],
    ),
    "flow_router.py": Case(
        replies=["Billing", "We are sorry: the double charge will be refunded."],
        args=["I was charged twice."],
        expect=["kind: billing", "answer: We are sorry: the double charge will be refunded.", "flow id: "],
        env={"CHATAGENT_WORKSPACE": os.path.join(tempfile.gettempdir(), "chatagent-examples-ws")},  # its flow store
    ),
    "group_chat_debate.py": Case(
        replies=["Optimist", "Cleaner air for all.", "Skeptic", "Shops will suffer.", "You", "[STOP]"],
        args=["--human", "Ban cars from city centres?"],
        stdin="I want both.\n",
        expect=["Optimist: Cleaner air for all.", "Skeptic: Shops will suffer.", "You: ", "(debate over)"],
    ),
    "assistant_rag.py": Case(
        replies=["Water them every morning, and again in the evening in July [greenhouse.md, p. 1]."],
        args=["-q", "When do I water the tomatoes?"],
        expect=[
            "user: When do I water the tomatoes?",
            "[greenhouse.md, p. 1].\n  [1] greenhouse.md, p. 1: # Greenhouse manual",
        ],
        env={"CHATAGENT_WORKSPACE": os.path.join(tempfile.gettempdir(), "chatagent-examples-ws")},
    ),
    "chinese_docs.py": Case(
        replies=[Reply(text="每天吃十二到三十八公斤竹子 [熊猫手册.docx, p. 1]。", chunk_size=3)],
        expect=["用户：大熊猫每天吃多少竹子？", "[熊猫手册.docx, p. 1]"],
        env={"CHATAGENT_WORKSPACE": os.path.join(tempfile.gettempdir(), "chatagent-examples-ws")},
    ),
    "serve_anywhere.py": Case(
        replies=[Reply(text="Paris.", chunk_size=2), Reply(text="Paris, on the Seine.", chunk_size=4)],
        args=["What is the capital of France?"],
        expect=["(MCP)", "mcp: Paris.", "a2a: Paris, on the Seine."],
    ),
    "streaming_object.py": Case(
        replies=[Reply(text='{"name": "Marie Curie", "born": 1867, "fields": ["physics", "chemistry"]}', chunk_size=6)],
        expect=[
            "so far: {'name': 'Ma'}",
            "so far: {'name': 'Marie Curie', 'born': 1867}",
            "so far: {'name': 'Marie Curie', 'born': 1867, 'fields': ['physics', 'chemistry']}",
            "valid: True",
        ],
    ),
    "long_conversation.py": Case(
        replies=["Forty weeks of steady growth; watered and weeded weekly.", "They grew well.", "Keep watering."],
        expect=[
            "earlier messages: Forty weeks of steady growth",
            "assistant: They grew well.",
            "user: And what should I do next week?\nassistant: Keep watering.",
        ],
    ),
}


def _examples() -> list[str]:
    return sorted(p.name for p in (ROOT / "examples").glob("*.py"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", _examples())
def test_example_runs(openai_server, name):
    case = EXAMPLES.get(name)
    assert case is not None, f"examples/{name} has no entry in EXAMPLES of tests/test_examples.py: add one"
    openai_server.add(*case.replies)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASHSCOPE")}
    env.update(
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=openai_server.base_url,
        OPENAI_MODEL="test-model",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
    )
    env.update(case.env)
    proc = processes.run(
        [sys.executable, str(ROOT / "examples" / name), *case.args],
        input=case.stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=case.timeout,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"examples/{name} exited {proc.returncode}:\n{output[-3000:]}"
    for text in case.expect:
        assert text in proc.stdout, f"examples/{name}: {text!r} not in its output:\n{output[-3000:]}"
    if case.use_all:
        assert openai_server.pending == 0, f"examples/{name} used only part of its scripted replies"
