"""Qwen-Agent tests/agents/test_custom_tool_object.py: an unregistered tool object in function_list."""

import json
import urllib.parse

import json5

from chatagent.agents import Assistant
from chatagent.tools.base import BaseTool

SOURCE = "tests/agents/test_custom_tool_object.py"
MODEL = [{"call": [["my_image_gen", {"prompt": "a dog"}]]}, {"say": "Here is a dog."}]


class MyImageGen(BaseTool):
    name = "my_image_gen"
    description = "AI painting (image generation) service, input text description, and return the image URL."
    parameters = [
        {
            "name": "prompt",
            "type": "string",
            "description": "Detailed description of the desired image content, in English",
            "required": True,
        }
    ]

    def call(self, params: str, **kwargs) -> str:
        prompt = json5.loads(params)["prompt"]
        prompt = urllib.parse.quote(prompt)
        return json.dumps({"image_url": f"https://image.pollinations.ai/prompt/{prompt}"}, ensure_ascii=False)


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    system = "According to the user's request, you must draw a picture with my_image_gen tool"
    bot = Assistant(llm=llm_cfg, system_message=system, function_list=[MyImageGen()])
    messages = [{"role": "user", "content": "draw a dog"}]
    for response in bot.run(messages=messages):
        print("bot response:", response)
    assert len(response) == 3
    assert response[1]["role"] == "function" and response[1]["name"] == "my_image_gen"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
