"""Qwen-Agent tests/agents/test_react_chat.py with chatagent's one switch: `ReActChat(..., transcript=False)`
answers in structured messages (the Thought as reasoning, the action as a function call and its result, the
Final Answer as content) instead of Qwen-Agent's one message of ReAct text."""

import json

from chatagent.agents import ReActChat
from chatagent.schema import Message
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "tests/agents/test_react_chat.py (with transcript=False)"
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
    agent = ReActChat(llm=llm_cfg, function_list=["local_weather"], transcript=False)
    messages = [Message("user", "海淀区天气")]
    *_, last = agent.run(messages)
    calls = [m for m in last if m.function_call]
    assert [json.loads(c.function_call.arguments) for c in calls] == [{"location": "海淀区"}]
    assert [m.content for m in last if m.role == "function"] == ['{"location": "海淀区", "weather": "晴"}']
    assert last[-1].role == "assistant" and last[-1].content == "海淀区今天晴，25度。"
    assert "Action:" not in last[-1].content and "Thought" not in last[-1].content


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
