"""A model backend written for Qwen-Agent (its docs' "add your own LLM": subclass BaseFnCallModel, implement
`_chat_stream(messages, delta_stream, generate_cfg)` and `_chat_no_stream(messages, generate_cfg)`, register it),
here a small client of an OpenAI-style HTTP server, used through `get_chat_model({'model_type': ...})` and by an
Assistant with a tool (the tool reaches the model through the function-calling prompt)."""

import json
import urllib.error
import urllib.request
from typing import Dict, Iterator, List, Optional

from chatagent.agents import Assistant
from chatagent.llm import get_chat_model
from chatagent.llm.base import ModelServiceError, register_llm
from chatagent.llm.function_calling import BaseFnCallModel
from chatagent.schema import ASSISTANT, Message
from chatagent.tools.base import BaseTool

SOURCE = "docs: adding a model backend (qwen_agent/llm/function_calling.py's BaseFnCallModel)"
MODEL = [
    {"say": "Hello from my backend."},
    {"say": "Hello again, all at once."},
    {"call": [["room_temperature", {"room": "kitchen"}]]},
    {"say": "The kitchen is at 21 degrees."},
]


@register_llm("my_http_llm")
class MyHttpLLM(BaseFnCallModel):
    def __init__(self, cfg: Optional[Dict] = None):
        super().__init__(cfg)
        self.server = cfg["model_server"]
        self.requests = 0

    def _post(self, messages: List[Message], generate_cfg: dict) -> str:
        def text(m: Message) -> str:
            return m.content if isinstance(m.content, str) else "".join(item.text or "" for item in m.content)

        body = {"model": self.model, "messages": [{"role": m.role, "content": text(m)} for m in messages]}
        if generate_cfg.get("stop"):
            body["stop"] = generate_cfg["stop"]
        req = urllib.request.Request(
            self.server + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["choices"][0]["message"]["content"] or ""
        except urllib.error.URLError as e:
            raise ModelServiceError(exception=e) from e

    def _chat_stream(self, messages: List[Message], delta_stream: bool, generate_cfg: dict) -> Iterator[List[Message]]:
        text = self._post(messages, generate_cfg)
        for end in range(5, len(text) + 5, 5):  # as if it streamed, five characters at a time
            yield [Message(ASSISTANT, text[:end])]

    def _chat_no_stream(self, messages: List[Message], generate_cfg: dict) -> List[Message]:
        return [Message(ASSISTANT, self._post(messages, generate_cfg))]


class RoomTemperature(BaseTool):
    name = "room_temperature"
    description = "The temperature of a room of the house, in degrees Celsius."
    parameters = {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}

    def call(self, params: str, **kwargs) -> str:
        return json.dumps({"room": json.loads(params)["room"], "celsius": 21})


def main(server: str, resources: str) -> None:
    llm_cfg = {"model_type": "my_http_llm", "model": "my-model", "model_server": server}
    llm = get_chat_model(llm_cfg)
    assert isinstance(llm, MyHttpLLM)

    *_, streamed = llm.chat([{"role": "user", "content": "Say hello."}])
    assert streamed == [{"role": "assistant", "content": "Hello from my backend."}], streamed
    once = llm.chat([{"role": "user", "content": "Say hello again."}], stream=False)
    assert once == [{"role": "assistant", "content": "Hello again, all at once."}], once

    bot = Assistant(llm=llm_cfg, function_list=[RoomTemperature()])
    *_, response = bot.run([{"role": "user", "content": "How warm is the kitchen?"}])
    calls = [m for m in response if m.get("function_call")]
    assert [c["function_call"]["name"] for c in calls] == ["room_temperature"], response
    assert json.loads(calls[0]["function_call"]["arguments"]) == {"room": "kitchen"}
    assert [m["content"] for m in response if m["role"] == "function"] == ['{"room": "kitchen", "celsius": 21}']
    assert response[-1]["content"] == "The kitchen is at 21 degrees.", response[-1]

    broken = get_chat_model({"model_type": "my_http_llm", "model": "m", "model_server": "http://127.0.0.1:9/v1"})
    try:
        broken.chat([{"role": "user", "content": "hi"}], stream=False)
    except ModelServiceError as e:
        assert isinstance(e.exception, urllib.error.URLError), e
    else:
        raise AssertionError("an unreachable server must raise ModelServiceError")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
