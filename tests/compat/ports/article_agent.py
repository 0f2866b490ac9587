"""Qwen-Agent tests/agents/test_article_agent.py, continue-writing mode: the agent shows what it found in the
file, then writes under ">\\n> Writing Text: \\n"."""

import os

from chatagent.agents import ArticleAgent

SOURCE = "tests/agents/test_article_agent.py"
RULES = ["keywords"]
MODEL = [{"say": "then save the result with image.save(path)."}]


def main(server: str, resources: str) -> None:
    agent = ArticleAgent(llm={"model": "qwen-max", "api_key": "", "model_server": server})
    messages = [
        {"role": "user", "content": [{"text": "To flip an image"}, {"file": os.path.join(resources, "doc.pdf")}]}
    ]
    *_, last = agent.run(messages)
    assert last[-2]["content"] == ">\n> Writing Text: \n"
    assert last[-1]["content"] == "then save the result with image.save(path)."
    assert last[0]["content"].startswith(">\n> Search for relevant information: \n")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
