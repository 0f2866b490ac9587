"""Qwen-Agent's GroupChat arguments: round-robin selection without a host model, and max_round per run
(docs guide/core_moduls/agent.md, GroupChat)."""

from chatagent.agents import Assistant, GroupChat

SOURCE = "qwen_agent/agents/group_chat.py (agent_selection_method, max_round)"
MODEL = [{"say": "Tabs, clearly."}, {"say": "Spaces, always."}]


def main(server: str, resources: str) -> None:
    llm = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    alice = Assistant(llm=llm, name="Alice", description="likes tabs", system_message="You like tabs.")
    bob = Assistant(llm=llm, name="Bob", description="likes spaces", system_message="You like spaces.")
    chat = GroupChat(agents=[alice, bob], agent_selection_method="round_robin")
    *_, last = chat.run([{"role": "user", "content": "Tabs or spaces?", "name": "user"}], max_round=2)
    assert [m["name"] for m in last] == ["Alice", "Bob"]
    assert [m["content"] for m in last] == ["Tabs, clearly.", "Spaces, always."]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
