"""Qwen-Agent README, "Developing Your Own Agent": a custom tool reading its arguments with json5, an Assistant
with a PDF, and typewriter_print for the stream."""

import json
import os
import urllib.parse

import json5

from chatagent.agents import Assistant
from chatagent.tools.base import BaseTool, register_tool
from chatagent.utils.output_beautify import typewriter_print

SOURCE = "README.md (Developing Your Own Agent)"
MODEL = [{"call": [["my_image_gen", {"prompt": "a dog"}]]}, {"say": "Here is the dog: ![dog](https://image/a%20dog)"}]
RULES = ["keywords"]


@register_tool("my_image_gen", allow_overwrite=True)
class MyImageGen(BaseTool):
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
        return json5.dumps({"image_url": f"https://image.pollinations.ai/prompt/{prompt}"}, ensure_ascii=False)


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max-latest", "model_server": server, "api_key": "EMPTY", "generate_cfg": {"top_p": 0.8}}
    system_instruction = "After receiving the user's request, you should first draw an image and obtain the image url."
    bot = Assistant(
        llm=llm_cfg,
        system_message=system_instruction,
        function_list=["my_image_gen"],
        files=[os.path.join(resources, "doc.pdf")],
    )
    messages = [{"role": "user", "content": "draw a dog and rotate it 90 degrees"}]
    response = []
    response_plain_text = ""
    for response in bot.run(messages=messages):
        response_plain_text = typewriter_print(response, response_plain_text)
    messages.extend(response)
    json.dumps(messages)  # the history is plain data
    assert response[1]["role"] == "function" and response[1]["name"] == "my_image_gen"
    assert json5.loads(response[1]["content"])["image_url"].endswith("a%20dog")
    assert "[TOOL_RESPONSE] my_image_gen" in response_plain_text and response_plain_text.endswith(
        "(https://image/a%20dog)"
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
