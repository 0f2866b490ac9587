"""A process that runs an agent on a stored session, for the tests of sessions across processes.

    python tests/support/session_child.py STORE_URL SESSION_ID

It reads one command per line on stdin and answers each with one JSON line on stdout:
    run TEXT        run the agent on the session with the user message TEXT -> {"answer": ...}
    hang TEXT       the same, but the model stops after its first words and waits forever; prints
                    {"streaming": "..."} once the first words have reached the caller
    messages        -> {"messages": [...]} the stored conversation
An error prints {"error": "TypeName: message"}. The model's answer says how many messages it was given, so the
tests see whether each process ran on the whole stored conversation.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatagent import BasicAgent, Message, Session  # noqa: E402
from chatagent.llm.base import BaseChatModel  # noqa: E402


class CountingModel(BaseChatModel):
    """Answers 'seen N: TEXT' (N messages in, TEXT the last one's); with `hang`, stops after 'seen N' forever."""

    def __init__(self, hang: bool = False) -> None:
        super().__init__({"model": "counting"})
        self.hang = hang

    def _chat_stream(self, messages, functions, cfg, usage):
        def say(text: str) -> list[Message]:
            return [Message.unchecked("assistant", text, None, None, None, {"index": 0})]

        yield say(f"seen {len(messages)}")
        if self.hang:
            while True:
                time.sleep(1)
        yield say(f": {messages[-1].text}")


def main() -> None:
    store, session_id = sys.argv[1], sys.argv[2]
    session = Session(session_id, store)
    agents = {hang: BasicAgent(llm=CountingModel(hang), name="counter") for hang in (False, True)}
    for line in sys.stdin:
        op, _, text = line.strip().partition(" ")
        try:
            if op == "messages":
                out = {"messages": session.messages()}
            elif op in ("run", "hang"):
                answer = ""
                for rsp in agents[op == "hang"].run([{"role": "user", "content": text}], session=session):
                    answer = rsp[-1]["content"]
                    if op == "hang":
                        print(json.dumps({"streaming": answer}), flush=True)
                out = {"answer": answer}
            else:
                out = {"error": f"unknown command {op!r}"}
        except Exception as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
