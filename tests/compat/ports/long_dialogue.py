"""Qwen-Agent examples/long_dialogue.py (and tests/examples/test_long_dialogue.py): a message far longer than the
question in it; the agent picks out the request and answers from the text it saved."""

from chatagent.agents import DialogueRetrievalAgent

SOURCE = "examples/long_dialogue.py"
RULES = ["keywords"]
MODEL = [{"say": "小明爸爸叫什么？"}, {"say": "小明的爸爸叫大头。"}]


def main(server: str, resources: str) -> None:
    bot = DialogueRetrievalAgent(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    long_text = "，".join(["这是干扰内容"] * 1000 + ["小明的爸爸叫大头"] + ["这是干扰内容"] * 1000)
    messages = [{"role": "user", "content": f"小明爸爸叫什么？\n{long_text}"}]
    response = []
    for response in bot.run(messages):
        print("bot response:", response)
    assert response[-1]["content"] == "小明的爸爸叫大头。"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
