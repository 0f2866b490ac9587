"""Qwen-Agent docs, guide/core_moduls/agent.md, "Nested development" (also examples/visual_storytelling.py): a
custom agent whose _run runs two Assistants and yields `response + rsp`, whole response lists."""

import copy
import os
from typing import Dict, Iterator, List, Optional, Union

from chatagent import Agent
from chatagent.agents import Assistant
from chatagent.llm import BaseChatModel
from chatagent.schema import ContentItem, Message
from chatagent.tools.base import BaseTool

SOURCE = "docs guide/core_moduls/agent.md (VisualStorytelling)"
RULES = ["keywords"]
MODEL = [{"say": "A girl plays with a dog on a beach at sunset."}, {"say": "It was a warm evening when Lily..."}]


class VisualStorytelling(Agent):
    """Customize an agent for writing story from pictures"""

    def __init__(self, function_list: Optional[List[Union[str, Dict, BaseTool]]] = None,
                 llm: Optional[Union[Dict, BaseChatModel]] = None, files=None, vl_llm=None):  # fmt: skip
        super().__init__(llm=llm)
        self.image_agent = Assistant(llm=vl_llm)
        self.writing_agent = Assistant(
            llm=self.llm,
            function_list=function_list,
            system_message="You are a student, first, you need to understand the content of the picture, then you "
            "should refer to the knowledge base and write a narrative essay of 800 words based on the picture.",
            files=files,
        )

    def _run(
        self, messages: List[Message], lang: str = "zh", max_ref_token: int = 4000, **kwargs
    ) -> Iterator[List[Message]]:
        assert isinstance(messages[-1]["content"], list) and any(item.image for item in messages[-1]["content"]), (
            "This agent requires input of images"
        )
        new_messages = copy.deepcopy(messages)
        new_messages[-1]["content"].append(
            ContentItem(text="Please provide a detailed description of all the details of this image")
        )
        response = []
        for rsp in self.image_agent.run(new_messages):
            yield response + rsp
        response.extend(rsp)
        new_messages.extend(rsp)
        new_messages.append(Message("user", "Start writing your narrative essay based on the above image content!"))
        for rsp in self.writing_agent.run(new_messages, lang=lang, max_ref_token=max_ref_token, **kwargs):
            yield response + rsp


def main(server: str, resources: str) -> None:
    llm = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    vl_llm = {"model": "qwen-vl-max", "model_server": server, "api_key": "EMPTY"}
    bot = VisualStorytelling(llm=llm, vl_llm=vl_llm, files=[os.path.join(resources, "doc.pdf")])
    messages = [{"role": "user", "content": [{"image": "https://images.local/dog_and_girl.jpeg"}]}]
    response = []
    for response in bot.run(messages):
        print(response)
    assert [m["content"] for m in response] == [m["say"] for m in MODEL]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
