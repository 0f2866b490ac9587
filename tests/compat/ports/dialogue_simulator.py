"""Qwen-Agent's DialogueSimulator and HumanSimulator (qwen_agent/agents/dialogue_simulator.py): a model playing
the user talks with an assistant until it says STOP."""

from chatagent.agents import Assistant, DialogueSimulator, HumanSimulator

SOURCE = "qwen_agent/agents/dialogue_simulator.py, human_simulator.py"
MODEL = [
    {"say": '["What is the capital of France?"]'},
    {"say": "Paris."},
    {"say": '["<|STOP|>"]'},
]


def main(server: str, resources: str) -> None:
    llm = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    user = HumanSimulator(llm=llm, system_message="You are a curious student.")
    bot = Assistant(llm=llm, name="tutor")
    sim = DialogueSimulator(user_agent=user, assistant_agent=bot, max_round=5)
    response = []
    for response in sim.run(messages=[]):
        print(response)
    assert [(m.role, m.content) for m in response] == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris."),
    ]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
