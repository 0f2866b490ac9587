"""Structured output as it streams: the object's fields fill in while the model writes its JSON.

    python examples/streaming_object.py "Marie Curie"

Each yield's last message carries the object parsed so far in `extra['parsed']` (the fields read so far,
validated leniently); the last yield carries the validated object.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from chatagent import BasicAgent


class Person(BaseModel):
    name: str
    born: int = Field(description="Year of birth")
    fields: list[str] = Field(description="Fields of work")


def main() -> None:
    who = " ".join(sys.argv[1:]) or "Marie Curie"
    bot = BasicAgent(llm=None, system_message="You are a precise encyclopedia.", response_format=Person)
    shown = None
    for response in bot.run([{"role": "user", "content": f"Give the facts about {who}."}]):
        extra = response[-1].get("extra") or {}
        if extra.get("parsed") not in (None, shown):
            shown = extra["parsed"]
            print("so far:", shown)
    print("valid:", extra["response_format"]["valid"])


if __name__ == "__main__":
    main()
