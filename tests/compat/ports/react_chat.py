"""Qwen-Agent tests/agents/test_react_chat.py, unchanged: ReActChat answers with one message holding the whole
Thought / Action / Observation / Final Answer text, on both (chatagent's structured messages are the opt-in
`transcript=False`, see react_chat_structured.py)."""

import json

from chatagent.agents import ReActChat
from chatagent.schema import Message
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "tests/agents/test_react_chat.py"
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


def make_agent(server: str) -> ReActChat:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    return ReActChat(llm=llm_cfg, function_list=["local_weather"])


def main(server: str, resources: str) -> None:
    agent = make_agent(server)
    messages = [Message("user", "海淀区天气")]
    *_, last = agent.run(messages)
    assert "\nAction: " in last[-1].content
    assert "\nAction Input: " in last[-1].content
    assert "\nObservation: " in last[-1].content
    assert "\nThought: " in last[-1].content
    assert "\nFinal Answer: " in last[-1].content


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
