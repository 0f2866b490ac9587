"""Tools for any model, in plain text: ReActChat's Thought / Action / Observation / Final Answer loop.

    python examples/react_tools.py "What is 17% of the population of Oslo?"

ReActChat needs no native function calling: the tools are described in the prompt and the model's
`Action:` lines are parsed (leniently) and run. The thought streams as it forms; an action is shown
only once it is complete. The model comes from the environment (see examples/basic_chat.py).
"""

from __future__ import annotations

import ast
import operator
import sys

from chatagent import ReActChat, tool

POPULATION = {"oslo": 709_000, "paris": 2_103_000, "rome": 2_755_000}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg}  # fmt: skip


@tool
def population(city: str) -> str:
    """How many people live in a city.

    Args:
        city: City name, e.g. "Oslo".
    """
    count = POPULATION.get(city.strip().lower())
    return f"{city}: {count} inhabitants" if count else f"No data for {city}."


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / ** and parentheses.

    Args:
        expression: e.g. "709000 * 0.17".
    """

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(f"unsupported expression: {ast.unparse(node)}")

    value = ev(ast.parse(expression, mode="eval").body)
    return str(round(value, 6))


def main() -> None:
    question = " ".join(sys.argv[1:]) or "What is 17% of the population of Oslo?"
    bot = ReActChat(llm=None, function_list=[population, calculate], max_llm_calls=8, transcript=False)
    print(f"user: {question}")
    last_kind = None
    for fragments in bot.run([{"role": "user", "content": question}], delta_stream=True):
        for f in fragments:
            if f.get("function_call"):
                call = f["function_call"]
                print(f"\naction: {call['name']}({call['arguments']})", flush=True)
                last_kind = None
            elif f["role"] == "function":
                print(f"observation: {f['content']}", flush=True)
            else:
                if f.get("reasoning_content"):
                    if last_kind != "thought":
                        print("\nthought: ", end="")
                    print(f["reasoning_content"], end="", flush=True)
                    last_kind = "thought"
                if f.get("content"):
                    if last_kind != "answer":
                        print("\nanswer: ", end="")
                    print(f["content"], end="", flush=True)
                    last_kind = "answer"
    print()


if __name__ == "__main__":
    main()
