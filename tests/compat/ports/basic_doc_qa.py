"""Qwen-Agent tests/agents/test_doc_qa.py: BasicDocQA answers about the file in the message (a local PDF here
instead of a web page)."""

import os

from chatagent.agents.doc_qa import BasicDocQA

SOURCE = "tests/agents/test_doc_qa.py"
RULES = ["keywords"]
MODEL = [{"say": "Image operations guide"}]


def main(server: str, resources: str) -> None:
    agent = BasicDocQA(llm={"model": "qwen-max", "api_key": "", "model_server": server})
    messages = [
        {"role": "user", "content": [{"text": "Summarize a title"}, {"file": os.path.join(resources, "doc.pdf")}]}
    ]
    *_, last = agent.run(messages)
    assert len(last[-1]["content"]) > 0
    assert last[-1]["name"] == "Basic DocQA"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
