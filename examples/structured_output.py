"""Structured output: the agent's answer as a validated pydantic object.

    python examples/structured_output.py "Marie Curie"

The model is asked for JSON matching the model's schema; an answer that does not validate is sent
back with the errors (up to `retries` times) before StructuredOutputError is raised.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from chatagent import BasicAgent, StructuredOutputError


class Person(BaseModel):
    name: str
    born: int = Field(description="Year of birth")
    fields: list[str] = Field(description="Fields of work")
    nobel_prizes: int = 0


def main() -> None:
    who = " ".join(sys.argv[1:]) or "Marie Curie"
    bot = BasicAgent(llm=None, system_message="You are a precise encyclopedia.")
    try:
        person = bot.run_nonstream(
            [{"role": "user", "content": f"Give the facts about {who}."}], response_format=Person, retries=2
        )
    except StructuredOutputError as e:
        print(f"no valid answer: {e.error}")
        sys.exit(1)
    print(f"name: {person.name}")
    print(f"born: {person.born}")
    print(f"fields: {', '.join(person.fields)}")
    print(f"nobel prizes: {person.nobel_prizes}")


if __name__ == "__main__":
    main()
