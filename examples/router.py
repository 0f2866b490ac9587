"""A router that answers small talk itself and hands real work to the right specialist.

    python examples/router.py "Write a Python function that reverses a string."

The router's model sees the specialists' names and descriptions and either answers or replies
`Call: <name>`; the chosen agent then answers the original conversation. The model comes from the
environment (see examples/basic_chat.py).
"""

from __future__ import annotations

import sys

from chatagent import BasicAgent, Router


def main() -> None:
    question = " ".join(sys.argv[1:]) or "Write a Python function that reverses a string."
    coder = BasicAgent(
        llm=None,
        name="coder",
        description="writes and explains code",
        system_message="You are a senior Python developer. Answer with short, correct code.",
    )
    translator = BasicAgent(
        llm=None,
        name="translator",
        description="translates text between languages",
        system_message="You are a translator. Give only the translation.",
    )
    router = Router(agents=[coder, translator], llm=None, name="router")
    print(f"user: {question}")
    speaker = None
    for fragments in router.run([{"role": "user", "content": question}], delta_stream=True):
        for f in fragments:
            if f.get("name") != speaker:
                speaker = f.get("name")
                print(f"{speaker}: ", end="", flush=True)
            if f.get("content"):
                print(f["content"], end="", flush=True)
    print()


if __name__ == "__main__":
    main()
