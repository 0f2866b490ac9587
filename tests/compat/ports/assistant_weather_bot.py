"""Qwen-Agent examples/assistant_weather_bot.py: an Assistant with a weather tool and a document, in Chinese (the
example's amap_weather and image_gen, which call web services, replaced by local tools of the same shape)."""

import json
import os

from chatagent.agents import Assistant
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "examples/assistant_weather_bot.py"
RULES = ["keywords"]
MODEL = [{"call": [["local_weather", {"location": "海淀区"}]]}, {"say": "海淀区今天晴。"}]


@register_tool("local_weather", allow_overwrite=True)
class LocalWeather(BaseTool):
    description = "获取对应城市的天气数据"
    parameters = [{"name": "location", "type": "string", "description": "城市/区具体名称", "required": True}]

    def call(self, params: str, **kwargs) -> str:
        return json.dumps({"location": json.loads(params)["location"], "weather": "晴"}, ensure_ascii=False)


def main(server: str, resources: str) -> None:
    system = "你扮演一个天气预报助手，你具有查询天气和画图能力。"
    bot = Assistant(
        llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"},
        name="天气预报助手",
        description="查询天气和画图",
        system_message=system,
        function_list=["local_weather"],
    )
    messages = [{"role": "user", "content": [{"text": "海淀区天气"}, {"file": os.path.join(resources, "doc.pdf")}]}]
    response = []
    for response in bot.run(messages):
        print("bot response:", response)
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert all(m["name"] in ("天气预报助手", "local_weather") for m in response)
    assert response[-1]["content"] == "海淀区今天晴。"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
