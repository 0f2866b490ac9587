"""Qwen-Agent docs, guide/core_moduls/agent.md, "Non nested development": a DocQA agent whose _run puts the
reference material into the system message and returns `self._call_llm(...)`; run with `knowledge=`."""

import copy
from typing import Iterator, List

from chatagent import Agent
from chatagent.schema import CONTENT, ROLE, SYSTEM, Message

SOURCE = "docs guide/core_moduls/agent.md (DocQA)"
MODEL = [{"say": "Use ImageOps.mirror(image)."}]
PROMPT_TEMPLATE_EN = """
Please fully understand the content of the following reference materials and organize a clear response that meets the user's questions.
# Reference materials:
{ref_doc}
"""
PROMPT_TEMPLATE = {"zh": PROMPT_TEMPLATE_EN, "en": PROMPT_TEMPLATE_EN}


class DocQA(Agent):
    def _run(self, messages: List[Message], knowledge: str = "", lang: str = "en", **kwargs) -> Iterator[List[Message]]:
        messages = copy.deepcopy(messages)
        system_prompt = PROMPT_TEMPLATE[lang].format(ref_doc=knowledge)
        if messages and messages[0][ROLE] == SYSTEM:
            messages[0][CONTENT] += system_prompt
        else:
            messages.insert(0, Message(SYSTEM, system_prompt))
        return self._call_llm(messages=messages)


def main(server: str, resources: str) -> None:
    bot = DocQA(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}, system_message="Be brief.")
    messages = [{"role": "user", "content": "How do I flip an image?"}]
    *_, last = bot.run(messages, knowledge="To flip an image horizontally, use ImageOps.mirror(image).")
    assert last == [{"role": "assistant", "content": "Use ImageOps.mirror(image)."}]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
