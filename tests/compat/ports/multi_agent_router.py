"""Qwen-Agent examples/multi_agent_router.py: a Router over a multimodal Assistant and a ReActChat tool agent
(the example's image_gen and code_interpreter replaced by a local tool of the same shape)."""

import json
import os

from chatagent.agents import Assistant, ReActChat, Router
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "examples/multi_agent_router.py"
RULES = ["keywords"]
MODEL = [
    {"say": "Call: 工具助手"},
    {"call": [["local_image_gen", {"prompt": "a dog and a girl"}]], "think": "I need to draw it."},
    {"say": "Here is the picture: ![](https://images.local/a-dog-and-a-girl.png)"},
]


@register_tool("local_image_gen", allow_overwrite=True)
class LocalImageGen(BaseTool):
    description = "Image generation: input a text description, get the URL of the image drawn from it."
    parameters = {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "What to draw, in English."}},
        "required": ["prompt"],
    }

    def call(self, params: str, **kwargs) -> str:
        prompt = json.loads(params)["prompt"]
        return json.dumps({"image_url": f"https://images.local/{prompt.replace(' ', '-')}.png"})


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    llm_cfg_vl = {"model": "qwen-vl-max", "model_server": server, "api_key": "EMPTY"}
    bot_vl = Assistant(llm=llm_cfg_vl, name="多模态助手", description="可以理解图像内容。")
    bot_tool = ReActChat(
        llm=llm_cfg,
        name="工具助手",
        description="可以使用画图工具和运行代码来解决问题",
        function_list=["local_image_gen"],
    )
    bot = Router(llm=llm_cfg, agents=[bot_vl, bot_tool])
    messages = [{"role": "user", "content": [{"text": "画一个狗和女孩"}, {"file": os.path.join(resources, "doc.pdf")}]}]
    response = []
    for response in bot.run(messages):
        print("bot response:", response)
    assert response[-1]["name"] == "工具助手"
    assert "a-dog-and-a-girl.png" in response[-1]["content"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
