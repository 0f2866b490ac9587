"""HumanSimulator: a model playing the user, to test an assistant with simulated conversations.

    user = HumanSimulator(llm=cfg, system_message='You are a traveller planning a week in Japan.')
    DialogueSimulator(user_agent=user, assistant_agent=bot, max_round=4).run_nonstream([])

Given the conversation so far from its own side (its messages are the assistant's, the assistant's are the
user's), the model writes a JSON list of possible next requests and one is picked at random (`seed`, a
constructor or run argument, makes it repeatable). It answers STOP ('<|STOP|>') when the conversation can
end, or when its reply is not such a list. The one message it yields is its request, as an assistant message
(DialogueSimulator turns it into the user's).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.llm.base import response_text
from chatagent.schema import ASSISTANT, USER, Message
from chatagent.schema.fragment import fragment

STOP = "<|STOP|>"
HUMAN_SIMULATOR_PROMPT = f"""Play a game where you act as the human user and the user acts as the AI assistant.
# Rules:
- Ask questions and make requests as a typical human user would.
- Your questions should be related to the provided context or the chat history.
- You should output a JSON list of four possible questions, and nothing more.
- The questions must be diverse in their complexity, intentions, and language usage.
- If you feel the conversation can end, please output ["{STOP}"] directly without any other content."""
BEGIN = "Please role-play as a human user and make your first request.\n\nBegin!"


class HumanSimulator(Agent):
    """Plays the user (see the module docstring).

    Args:
        system_message: who the simulated user is and what they want (added to the game's rules).
        seed: seeds the choice among the proposed requests (default 42).
        function_list, llm, name, description: see Agent.
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        seed: int = 42,
        **kwargs: Any,
    ) -> None:
        rules = HUMAN_SIMULATOR_PROMPT + ("\n\n" + system_message if system_message else "")
        super().__init__(function_list, llm, rules, name, description, **kwargs)
        self.seed = seed

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        first = 1 if messages and messages[0].role == "system" else 0
        if len(messages) == first or messages[first].role != USER:
            messages = messages[:first] + [Message.unchecked(USER, BEGIN)] + messages[first:]
        reply = yield from self._call_llm(messages, hide=True)
        seed = kwargs.get("seed")
        yield [
            fragment(
                Message.unchecked(ASSISTANT, pick_request(response_text(reply), self.seed if seed is None else seed)), 0
            )
        ]


def pick_request(text: str, seed: int) -> str:
    """One of the requests listed in `text` (a JSON list), chosen with `seed`; STOP if there is no such list."""
    try:
        options = json.loads(text.strip().removeprefix("```json").removesuffix("```"))
    except ValueError:
        return STOP
    if not isinstance(options, list) or not options:
        return STOP
    choice = random.Random(seed).choice(options)
    return choice if isinstance(choice, str) and choice else STOP


__all__ = ["HumanSimulator", "STOP", "pick_request"]
