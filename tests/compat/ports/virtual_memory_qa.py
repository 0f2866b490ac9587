"""Qwen-Agent examples/virtual_memory_qa.py: the agent searches the user's file with its retrieval tool when it
needs to, and answers from what it found."""

import os

from chatagent.agents import VirtualMemoryAgent

SOURCE = "examples/virtual_memory_qa.py"


def MODEL(resources: str) -> list:
    doc = os.path.join(resources, "doc.pdf")
    return [
        {"call": [["retrieval", {"query": "flip image horizontally", "files": [doc]}]]},
        {"say": "Use ImageOps.mirror(image) to flip it horizontally."},
    ]


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    bot = VirtualMemoryAgent(llm=llm_cfg, system_message="一个文档问答助手。")
    messages = [
        {"role": "user", "content": [{"text": "How do I flip an image?"}, {"file": os.path.join(resources, "doc.pdf")}]}
    ]
    response = []
    for response in bot.run(messages):
        print("bot response:", response)
    assert response[0]["function_call"]["name"] == "retrieval"
    assert response[1]["role"] == "function" and response[1]["name"] == "retrieval"
    assert response[-1]["content"] == "Use ImageOps.mirror(image) to flip it horizontally."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
