"""A conversation longer than the model's window, summarised once and kept in its session.

    python examples/long_conversation.py

A session is filled with forty long turns; the agent's prompt may take 2,000 tokens. With
`compaction="summarise"` the oldest turns are summarised when the run starts (here by a model that reads longer
prompts: give a cheaper one), the summary is stored with the turn, and the next turn reuses it.
"""

from __future__ import annotations

import tempfile

from chatagent import BasicAgent, Compaction, Session
from chatagent.llm.registry import default_llm_config


def main() -> None:
    store = tempfile.mkdtemp(prefix="chatagent-long-")
    session = Session("garden", f"sqlite:///{store}/sessions.db")
    for week in range(40):
        session.append([
            {"role": "user", "content": f"Week {week}: the tomatoes grew. " + "Watered, weeded and checked. " * 30},
            {"role": "assistant", "content": "Noted."},
        ])  # fmt: skip
    cfg = {**default_llm_config(), "generate_cfg": {"max_input_tokens": 2000}}
    summariser = {**default_llm_config(), "generate_cfg": {"max_input_tokens": 16000}}
    bot = BasicAgent(llm=cfg, compaction=Compaction(llm=summariser, budget=200))
    for question in ("How did the tomatoes do?", "And what should I do next week?"):
        response = bot.run_nonstream([{"role": "user", "content": question}], session=session)
        mark = (response[0].get("extra") or {}).get("compaction")
        if mark:
            print(f"(summarised {mark['covers']} earlier messages: {mark['summary']})")
        print(f"user: {question}\nassistant: {response[-1]['content']}")


if __name__ == "__main__":
    main()
