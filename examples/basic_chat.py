"""Chat with a model, the answer printed as it streams in.

    python examples/basic_chat.py "What is the capital of France?"

The model comes from the environment: DASHSCOPE_API_KEY (DashScope's qwen-plus), or OPENAI_API_KEY
with OPENAI_BASE_URL and OPENAI_MODEL (any OpenAI-compatible server), or else the embedded local model.
"""

from __future__ import annotations

import sys

from chatagent import BasicAgent


def main() -> None:
    question = " ".join(sys.argv[1:]) or "Say hello and tell me one fun fact about octopuses."
    bot = BasicAgent(llm=None, system_message="You are a helpful, concise assistant.")
    messages = [{"role": "user", "content": question}]
    print(f"user: {question}\nassistant: ", end="", flush=True)
    # delta_stream=True yields only what is new: print each piece as it arrives
    for fragments in bot.run(messages, delta_stream=True):
        for f in fragments:
            if f.get("reasoning_content"):
                print(f"\033[2m{f['reasoning_content']}\033[0m", end="", flush=True)
            if isinstance(f.get("content"), str):
                print(f["content"], end="", flush=True)
    print()


if __name__ == "__main__":
    main()
