"""Qwen-Agent examples/llm_riddles.py: a custom Agent that nests an Assistant in its constructor and whose _run
returns `self._call_llm(...)`."""

from typing import Dict, Iterator, List, Optional, Union

import json5

from chatagent import Agent
from chatagent.agents import Assistant
from chatagent.llm import BaseChatModel
from chatagent.schema import Message

SOURCE = "examples/llm_riddles.py"
MODEL = [{"say": '["1+1=3", "主莫朗玛峰"]'}, {"say": "1+1=3"}, {"say": "主莫朗玛峰"}]


class LLMRiddles(Agent):
    """Customize an agent for game: Surrounded by LLM"""

    def __init__(self, llm: Optional[Union[Dict, BaseChatModel]] = None):
        super().__init__(llm=llm)
        self.examiner_agent = Assistant(
            llm=self.llm,
            system_message="请你创造十个比较离谱或小众的短语。返回格式为字符串列表，不要返回其余任何内容。",
        )
        *_, last = self.examiner_agent.run([Message("user", "开始")])
        self.topics = json5.loads(last[-1].content)

    def _run(self, messages: List[Message], lang: str = "en", **kwargs) -> Iterator[List[Message]]:
        return self._call_llm(messages=messages)


def main(server: str, resources: str) -> None:
    bot = LLMRiddles(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    wins = 0
    for topic in bot.topics:
        messages = [Message("user", f"请直接输出“{topic}”（不需要引号），不要说其他内容")]
        response = []
        for response in bot.run(messages=messages):
            print("bot response:", response)
        if response and response[-1]["content"] == topic:
            wins += 1
    assert bot.topics == ["1+1=3", "主莫朗玛峰"] and wins == 2


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
