"""Qwen-Agent tests/agents/test_react_chat.py with the one documented switch: `ReActChat(..., transcript=True)`
answers in Qwen-Agent's form, one message with the whole ReAct text."""

import json

from chatagent.agents import ReActChat
from chatagent.schema import Message
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "tests/agents/test_react_chat.py (with transcript=True)"
QWEN_AGENT = "skip: transcript= is chatagent's switch (the unchanged test is react_chat.py)"
MODEL = [
    {"call": [["local_weather", {"location": "海淀区"}]], "think": "我需要查询海淀区的天气。"},
    {"say": "海淀区今天晴，25度。"},
]


@register_tool("local_weather", allow_overwrite=True)
class LocalWeather(BaseTool):
    description = "获取对应城市的天气数据"
    parameters = {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "城市/区具体名称"}},
        "required": ["location"],
    }

    def call(self, params: str, **kwargs) -> str:
        return json.dumps({"location": json.loads(params)["location"], "weather": "晴"}, ensure_ascii=False)


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    agent = ReActChat(llm=llm_cfg, function_list=["local_weather"], transcript=True)
    messages = [Message("user", "海淀区天气")]
    *_, last = agent.run(messages)
    assert len(last) == 1
    assert "\nAction: local_weather" in last[-1].content
    assert '\nAction Input: {"location": "海淀区"}' in last[-1].content
    assert '\nObservation: {"location": "海淀区", "weather": "晴"}' in last[-1].content
    assert "\nThought: " in last[-1].content
    assert last[-1].content.endswith("\nFinal Answer: 海淀区今天晴，25度。")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
