"""Qwen-Agent examples/tir_math.py: tool-integrated reasoning; the model's Python runs and its output is written into
the answer, which the model then continues."""

from chatagent.agents import TIRMathAgent

SOURCE = "examples/tir_math.py"
QWEN_AGENT = "skip: needs qwen-agent[python_executor], which the benchmark venv does not install"
TIR_SYSTEM = "Please integrate natural language reasoning with programs to solve the problem above, and put your final answer within \\boxed{}."
MODEL = [
    {"say": "Let me compute the first 10 Fibonacci numbers.\n```python\na, b = 0, 1\nout = []\nfor _ in range(10):\n"
     "    out.append(a)\n    a, b = b, a + b\nprint(out)\n```\n"},
    {"say": "The first ten are \\boxed{[0, 1, 1, 2, 3, 5, 8, 13, 21, 34]}."},
]  # fmt: skip


def main(server: str, resources: str) -> None:
    llm_cfg = {
        "model": "qwen2.5-math-72b-instruct",
        "model_server": server,
        "api_key": "EMPTY",
        "generate_cfg": {"top_k": 1},
    }
    bot = TIRMathAgent(llm=llm_cfg, name="Qwen2.5-Math", system_message=TIR_SYSTEM)
    messages = [{"role": "user", "content": "斐波那契数列前10个数字"}]
    response = []
    for response in bot.run(messages):
        print(response)
    assert len(response) == 1 and response[0]["name"] == "Qwen2.5-Math"
    text = response[0]["content"]
    assert "```output\n[0, 1, 1, 2, 3, 5, 8, 13, 21, 34]\n```" in text
    assert text.endswith("\\boxed{[0, 1, 1, 2, 3, 5, 8, 13, 21, 34]}.")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
