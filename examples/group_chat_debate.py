"""A debate: two agents take turns while a host model decides who speaks next and when it is over.

    python examples/group_chat_debate.py "Should cities ban cars from their centres?"
    python examples/group_chat_debate.py --human "Tabs or spaces?"     # you take part too

With --human you are a participant: when it is your turn the chat pauses, your line is read from the
terminal and the chat resumes (an empty line ends it). The model comes from the environment (see
examples/basic_chat.py).
"""

from __future__ import annotations

import sys

from chatagent import BasicAgent, GroupChat, UserAgent, pending_input


def main() -> None:
    args = sys.argv[1:]
    human = "--human" in args
    topic = " ".join(a for a in args if a != "--human") or "Should cities ban cars from their centres?"
    agents = [
        BasicAgent(
            llm=None,
            name="Optimist",
            description="argues for the proposal",
            system_message="You argue for the proposal. Two or three sentences per turn.",
        ),
        BasicAgent(
            llm=None,
            name="Skeptic",
            description="argues against the proposal",
            system_message="You argue against the proposal. Two or three sentences per turn.",
        ),
    ]
    if human:
        agents.append(UserAgent(name="You", description="a human voter who may ask questions"))
    chat = GroupChat(agents, selection="auto", llm=None, max_rounds=4, background=f"A debate on: {topic}")
    history: list[dict] = [{"role": "user", "content": f"Debate: {topic}"}]
    print(f"topic: {topic}")
    while True:
        response: list[dict] = []
        shown = 0
        for response in chat.run(history):
            # a UI would render every yield; here each turn is printed once it is complete
            for m in response[shown:-1]:
                _print(m)
            shown = max(shown, len(response) - 1)
        for m in response[shown:]:
            _print(m)
        who = pending_input(response)
        if who is None:
            break
        try:
            line = input(f"{who}: ").strip()
        except EOFError:
            line = ""
        if not line:
            break
        history += response[:-1] + [{"role": "user", "name": who, "content": line}]
    print("(debate over)")


def _print(m: dict) -> None:
    if m["role"] == "assistant" and m.get("content") and not m.get("function_call") and not pending_input([m]):
        print(f"{m['name']}: {m['content']}", flush=True)


if __name__ == "__main__":
    main()
