"""A custom agent with Qwen-Agent's FnCallAgent loop copied into its _run (qwen_agent/agents/fncall_agent.py), as
users write when they need a variation of it: `_call_llm` streams whole lists, `_detect_tool`, `_call_tool`,
and `yield response + output`."""

import copy
import json
from typing import Iterator, List

from chatagent import Agent
from chatagent.schema import FUNCTION, Message
from chatagent.tools.base import BaseTool

SOURCE = "qwen_agent/agents/fncall_agent.py (the loop, in a user's agent)"
MODEL = [{"call": [["add", {"a": 2, "b": 3}]]}, {"say": "2 + 3 = 5"}]


class Add(BaseTool):
    name = "add"
    description = "Add two numbers."
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }

    def call(self, params: str, **kwargs) -> str:
        args = json.loads(params)
        return str(args["a"] + args["b"])


class MyFnCallAgent(Agent):
    def _run(self, messages: List[Message], lang: str = "en", **kwargs) -> Iterator[List[Message]]:
        messages = copy.deepcopy(messages)
        num_llm_calls_available = 5
        response = []
        while num_llm_calls_available > 0:
            num_llm_calls_available -= 1
            output_stream = self._call_llm(
                messages=messages, functions=[f.function for f in self.function_map.values()]
            )
            output: List[Message] = []
            for output in output_stream:
                if output:
                    yield response + output
            if output:
                response.extend(output)
                messages.extend(output)
                used_any_tool = False
                for out in output:
                    use_tool, tool_name, tool_args, _ = self._detect_tool(out)
                    if use_tool:
                        tool_result = self._call_tool(tool_name, tool_args, messages=messages, **kwargs)
                        fn_msg = Message(role=FUNCTION, name=tool_name, content=tool_result,
                                         extra={"function_id": out.extra.get("function_id", "1")})  # fmt: skip
                        messages.append(fn_msg)
                        response.append(fn_msg)
                        yield response
                        used_any_tool = True
                if not used_any_tool:
                    break
        yield response


def main(server: str, resources: str) -> None:
    bot = MyFnCallAgent(function_list=[Add()], llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    response = []
    for response in bot.run([{"role": "user", "content": "What is 2 + 3?"}]):
        print(response)
    assert response[0]["function_call"]["name"] == "add"
    assert response[1] == {"role": "function", "name": "add", "content": "5", "extra": response[1]["extra"]}
    assert response[-1]["content"] == "2 + 3 = 5"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
