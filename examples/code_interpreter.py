"""The code interpreter: the model writes Python, a sandbox runs it, the model reads the result.

    python examples/code_interpreter.py "What is the 30th Fibonacci number? Plot the first 15."

Each conversation (`session_id`) gets its own sandboxed Python process and work directory; variables
survive between calls. With bubblewrap installed the code has no network and can write only its work
directory. The model comes from the environment (see examples/basic_chat.py).
"""

from __future__ import annotations

import json
import sys

from chatagent import FnCallAgent


def main() -> None:
    question = " ".join(sys.argv[1:]) or "What is the 30th Fibonacci number? Plot the first 15."
    with FnCallAgent(
        llm=None,  # from the environment: DASHSCOPE_API_KEY, OPENAI_API_KEY (+ base URL and model), or local
        function_list=[{"name": "code_interpreter", "timeout": 30}],
        system_message="You are a helpful assistant. Use code_interpreter to compute and to plot.",
    ) as bot:
        print(f"user: {question}")
        response = bot.run_nonstream([{"role": "user", "content": question}], session_id="example")
        for m in response:
            if m.get("function_call"):
                print(f"call: {m['function_call']['name']}\n{_args(m['function_call']['arguments'])}")
            elif m["role"] == "function":
                content = m["content"]
                if isinstance(content, list):
                    images = [c["image"] for c in content if "image" in c]
                    content = "\n".join(c["text"] for c in content if "text" in c)
                    content += "".join(f"\n(image: {p})" for p in images)
                print(f"result:\n{content}")
            else:
                print(f"assistant: {m['content']}")
        print(bot.function_map["code_interpreter"].isolation)


def _args(arguments: str) -> str:
    try:
        return json.loads(arguments).get("code", arguments)
    except ValueError:
        return arguments


if __name__ == "__main__":
    main()
