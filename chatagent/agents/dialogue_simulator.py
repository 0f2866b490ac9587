"""DialogueSimulator: a conversation between a simulated user (a HumanSimulator) and an assistant.

    sim = DialogueSimulator(user_agent=HumanSimulator(llm=cfg), assistant_agent=bot, max_round=5)
    for response in sim.run([]):          # or a conversation to continue
        ...

Each round the user speaks if the conversation is empty or ends with the assistant, then the assistant
answers a user message; the response holds the user's requests (role 'user') and the assistant's answers
(streamed as it writes them). It ends after `max_round` rounds or when the user says STOP. Use it to make
test conversations for an agent, or to see how it holds up over several turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent, hidden
from chatagent.agents.human_simulator import BEGIN, STOP
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, Message, content_text
from chatagent.schema.fragment import fragment


class DialogueSimulator(Agent):
    """Runs a simulated user against an assistant (see the module docstring).

    Args:
        user_agent: the simulated user, usually a HumanSimulator.
        assistant_agent: the agent under test.
        max_round: rounds at most (default 5).
        llm, name, description, ...: see Agent (the simulator itself calls no model).
    """

    def __init__(self, user_agent: Agent, assistant_agent: Agent, max_round: int = 5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(max_round, int) or max_round < 1:
            raise ValueError(f"max_round must be a positive integer, got {max_round!r}")
        self.user_agent = user_agent
        self.assistant_agent = assistant_agent
        self.max_round = max_round

    def _with_system_message(self, msgs: list[Message]) -> list[Message]:
        return msgs  # an empty conversation is allowed here; the two agents have their own instructions

    def run(self, messages: Any = None, **kwargs: Any) -> Any:
        """As Agent.run; `messages` may be empty (the simulated user starts)."""
        return super().run(_or_start(messages), **kwargs)

    def run_nonstream(self, messages: Any = None, **kwargs: Any) -> Any:
        """As Agent.run_nonstream; `messages` may be empty (the simulated user starts)."""
        return super().run_nonstream(_or_start(messages), **kwargs)

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        conversation = [m for m in messages if not (m.extra or {}).get(START)]
        response: list[Message] = []
        for _ in range(self.max_round):
            if not conversation or conversation[-1].role == ASSISTANT:
                seen = swap_roles(conversation) or [Message.unchecked(USER, BEGIN)]  # the user's side of it
                turn = yield from self._subagent(self.user_agent, seen, lang, view=hidden)
                text = "".join(content_text(m.content) for m in turn if m.role == ASSISTANT)
                if not text or STOP in text:
                    return
                said = Message.unchecked(USER, text, self.user_agent.name)
                yield [fragment(said, len(response))]
                conversation.append(said)
                response.append(said)
            if conversation[-1].role == USER:
                turn = yield from self._subagent(self.assistant_agent, conversation, lang, start=len(response))
                conversation += turn
                response += turn


START = "dialogue_start"


def _or_start(messages: Any) -> list[Message]:
    """The conversation, or a marker standing for "none yet" (an agent's run needs at least one message)."""
    msgs = list(messages or [])
    return msgs or [Message.unchecked(USER, "", None, None, None, {START: True})]


def swap_roles(messages: list[Message]) -> list[Message]:
    """The conversation from the other side: user and assistant swapped, tool calls and results left out."""
    out = []
    for m in messages:
        if m.role == FUNCTION or m.function_call is not None:
            continue
        if m.role != SYSTEM and content_text(m.content).strip():
            out.append(m.copy(role=ASSISTANT if m.role == USER else USER))
        elif m.role == SYSTEM:
            out.append(m)
    return out


__all__ = ["DialogueSimulator", "swap_roles"]
