"""Qwen-Agent tests/memory/test_memory.py: Memory finds the excerpts of the message's file, as a JSON list."""

import os

import json5

from chatagent.memory import Memory
from chatagent.schema import ContentItem, Message

SOURCE = "tests/memory/test_memory.py"
RULES = ["keywords"]
MODEL = []


def main(server: str, resources: str) -> None:
    mem = Memory(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    messages = [
        Message("user", [ContentItem(text="how to flip images"), ContentItem(file=os.path.join(resources, "doc.pdf"))])
    ]
    *_, last = mem.run(messages, max_ref_token=4000, parser_page_size=500)
    assert isinstance(last[-1].content, str)
    assert len(last[-1].content) > 0
    res = json5.loads(last[-1].content)
    assert isinstance(res, list)
    assert "ImageOps.mirror" in json5.dumps(res)


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
