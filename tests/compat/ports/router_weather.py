"""Qwen-Agent tests/agents/test_router.py: the router hands a weather question to the Assistant that has the
weather tool (amap_weather replaced by a local tool of the same shape); Messages in, Messages out."""

import json

from chatagent.agents import Assistant, Router
from chatagent.schema import Message
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "tests/agents/test_router.py"
MODEL = [
    {"say": "Call: 天气预报助手"},
    {"call": [["local_weather", {"location": "海淀区"}]]},
    {"say": "海淀区今天晴，25度。"},
]


@register_tool("local_weather", allow_overwrite=True)
class LocalWeather(BaseTool):
    description = "获取对应城市的天气数据"
    parameters = {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "城市/区具体名称，如`北京市海淀区`请描述为`海淀区`"}
        },
        "required": ["location"],
    }

    def call(self, params: str, **kwargs) -> str:
        return json.dumps(
            {"location": json.loads(params)["location"], "weather": "晴", "temperature": 25}, ensure_ascii=False
        )


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    llm_cfg_vl = {"model": "qwen-vl-max", "model_server": server, "api_key": "EMPTY"}
    bot_vl = Assistant(llm=llm_cfg_vl, name="多模态助手", description="可以理解图像内容。")
    bot_tool = Assistant(llm=llm_cfg, name="天气预报助手", description="可以查询天气", function_list=["local_weather"])
    bot = Router(llm=llm_cfg, agents=[bot_vl, bot_tool])
    messages = [Message("user", "海淀区天气")]
    *_, last = bot.run(messages)
    assert last[-3].function_call.name == "local_weather"
    assert last[-3].function_call.arguments == '{"location": "海淀区"}'
    assert last[-2].name == "local_weather"
    assert len(last[-1].content) > 0


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
