"""The typed request between `chat()` and a backend: routing and prompt-based function calling hand on new requests
and change none, and the `Backend` protocol is all they need of a model: a backend that is no BaseChatModel is routed like one."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import cast

import pytest

from chatagent.llm.fncall_prompt import FN_ARGS, FN_NAME, FN_RESULT
from chatagent.llm.request import ASYNC, SYNC, ModelRequest, Reading, ReplyStream, Usage
from chatagent.llm.routing import plan
from chatagent.llm.settings import split_generate_cfg
from chatagent.schema import ASSISTANT, Message, to_messages
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import collect

pytestmark = pytest.mark.timeout(60)

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
USER = to_messages([{"role": "user", "content": "What's the weather in Paris?"}])
NOUS_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
QWEN_CALL = f'{FN_NAME}: get_weather\n{FN_ARGS}: {{"city": "Paris"}}\n'


class PromptOnly:
    """A backend that is no BaseChatModel: a name, a server without native tools, and a reply of raw text in two
    chunks. It keeps the requests it is given."""

    model = "prompt-only"

    def __init__(self, text: str) -> None:
        self.text = text
        self.native_tools = False
        self.seen: list[ModelRequest] = []

    def _chunks(self, request: ModelRequest) -> list[list[Fragment]]:
        self.seen.append(request)
        half = len(self.text) // 2
        return [[Fragment(ASSISTANT, part, index=0)] for part in (self.text[:half], self.text[half:])]

    def backend_reply(self, request: ModelRequest, io: Reading[ReplyStream]) -> ReplyStream:
        return cast(ReplyStream, self._on_loop(request) if io.on_loop else iter(self._chunks(request)))

    async def _on_loop(self, request: ModelRequest) -> AsyncIterator[list[Fragment]]:
        for fragments in self._chunks(request):
            yield fragments


def make_request(**generate_cfg: object) -> ModelRequest:
    settings, cfg = split_generate_cfg({"temperature": 0, **generate_cfg})
    return ModelRequest(list(USER), [WEATHER], cfg, settings, Usage(), stream=True)


def the_call(reply: list[Message]) -> tuple[str, str]:
    [message] = reply
    assert message.function_call is not None
    return message.function_call.name, message.function_call.arguments


@pytest.mark.parametrize("aio", [False, True])
@pytest.mark.parametrize(("fmt", "text"), [(None, NOUS_CALL), ("qwen", QWEN_CALL)])
def test_a_prompt_based_call_hands_on_a_new_request_and_changes_none(aio: bool, fmt: str | None, text: str) -> None:
    backend = PromptOnly(text)
    request = make_request(request_timeout=5, **({"fncall_prompt_type": fmt} if fmt else {}))
    before = (list(request.messages), request.functions, dict(request.cfg), dataclasses.replace(request.settings))

    if aio:

        async def ask() -> list[list[Fragment]]:
            return [fragments async for fragments in plan(backend, request).reply(ASYNC)]

        reply = collect(asyncio.run(asyncio.wait_for(ask(), 20)))
    else:
        reply = collect(plan(backend, request).reply(SYNC))

    assert the_call(reply) == ("get_weather", '{"city": "Paris"}')
    # the backend got a request of its own: the tools in the prompt, none as native tools, the timeout in its cfg
    [sent] = backend.seen
    assert sent is not request and sent.functions is None and sent.usage is request.usage
    assert "get_weather" in sent.messages[0].text and sent.messages[-1].text == USER[-1].text
    assert sent.cfg["request_timeout"] == 5 and sent.cfg["temperature"] == 0
    assert (FN_RESULT in sent.cfg.get("stop", [])) == (fmt == "qwen")
    # and the request asked is as it was: no format set in its settings, no key added to its cfg
    assert (list(request.messages), request.functions, dict(request.cfg), request.settings) == before
    assert request.settings.fncall_prompt_type == fmt
    assert request.usage is not None and request.usage.calls == 1


def test_replace_makes_a_new_request() -> None:
    request = make_request()
    longer = request.replace(cfg={**request.cfg, "max_tokens": 10})
    assert longer.cfg == {"temperature": 0, "max_tokens": 10} and request.cfg == {"temperature": 0}
    assert longer.messages is request.messages and longer.settings is request.settings
    with pytest.raises(TypeError):
        request.replace(tools=[])
