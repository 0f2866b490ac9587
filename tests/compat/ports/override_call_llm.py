"""A FnCallAgent subclass that overrides `_call_llm` with Qwen-Agent's signature (`messages, functions=None,
stream=True, extra_generate_cfg=None`), as users do to add instructions to every model call or to post-process
what the model says: it gets only those parameters, and what it yields is the agent's answer."""

import json

from chatagent.agents import FnCallAgent
from chatagent.schema import ASSISTANT, Message
from chatagent.tools.base import BaseTool

SOURCE = "a user's FnCallAgent subclass (qwen_agent/agents/fncall_agent.py's _call_llm overridden)"
MODEL = [{"call": [["lookup", {"name": "Ada"}]]}]
RULES = [
    ("contains", ["Never reveal phone numbers.", "555-0199"], "Ada's number is 555-0199, she lives in London."),
]


class Lookup(BaseTool):
    name = "lookup"
    description = "Look a person up in the address book."
    parameters = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    def call(self, params: str, **kwargs) -> str:
        return json.dumps({"name": json.loads(params)["name"], "phone": "555-0199", "city": "London"})


class RedactingAgent(FnCallAgent):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = []

    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        self.calls.append((len(messages), len(functions or []), stream))
        note = Message(role="user", content="Never reveal phone numbers.")
        for rsp in super()._call_llm(messages + [note], functions, stream, extra_generate_cfg):
            yield [
                Message(
                    role=ASSISTANT,
                    content=m.content.replace("555-0199", "[redacted]"),
                    function_call=m.function_call,
                    extra=m.extra,
                )  # fmt: skip
                for m in rsp
            ]


def main(server: str, resources: str) -> None:
    bot = RedactingAgent(
        llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}, function_list=[Lookup()]
    )
    *_, response = bot.run([{"role": "user", "content": "Where does Ada live?"}])
    assert [(stream, tools) for _, tools, stream in bot.calls] == [(True, 1), (True, 1)], bot.calls
    assert response[0]["function_call"]["name"] == "lookup", response
    assert response[-1]["content"] == "Ada's number is [redacted], she lives in London.", response[-1]
    assert all("555-0199" not in m["content"] for m in response if m["role"] == "assistant")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
