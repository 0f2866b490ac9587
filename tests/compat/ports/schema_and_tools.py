"""Qwen-Agent's schema and tool-development API (docs guide/core_moduls/schema.md and tool.md): the field and
content-type constants, dict-style and str() access to messages, ContentItem.type / get_type_and_value(), tools
registered again with allow_overwrite, built-in tools built from TOOL_REGISTRY, and _verify_json_format_args
raising ValueError on bad arguments."""

from chatagent.schema import (
    ASSISTANT, CONTENT, DEFAULT_SYSTEM_MESSAGE, FILE, FUNCTION, IMAGE, NAME, REASONING_CONTENT, ROLE, USER,
    ContentItem, FunctionCall, Message,
)  # fmt: skip
from chatagent.tools import TOOL_REGISTRY
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "docs guide/core_moduls/schema.md, tool.md"
MODEL = []


def main(server: str, resources: str) -> None:
    msg = Message(
        role=USER, content=[ContentItem(text="Describe this image:"), ContentItem(image="https://example.com/cat.jpg")]
    )
    assert msg[ROLE] == "user" and msg.get("non_existent_key", "default") == "default"
    assert [item.type for item in msg[CONTENT]] == ["text", IMAGE] and FILE == "file"
    assert msg[CONTENT][1].get_type_and_value() == ("image", "https://example.com/cat.jpg")
    assert str(Message(role=ASSISTANT, content="hi")) == str({"role": "assistant", "content": "hi"})
    call = Message(
        role=ASSISTANT, content="", function_call=FunctionCall(name="get_weather", arguments='{"city": "Tokyo"}')
    )
    assert (
        call.function_call.name == "get_weather"
        and call.model_dump()["function_call"]["arguments"] == '{"city": "Tokyo"}'
    )
    result = Message(role=FUNCTION, name="get_weather", content='{"temperature": 25}')
    assert result[NAME] == "get_weather" and REASONING_CONTENT == "reasoning_content" and DEFAULT_SYSTEM_MESSAGE == ""
    assert Message("user", None).content == ""
    try:
        ContentItem(text="Hi", image="x.png")
        raise AssertionError("two kinds in one content item must be refused")
    except ValueError:
        pass

    @register_tool("port_echo", allow_overwrite=True)
    class Echo(BaseTool):
        description = "Echo"
        parameters = [{"name": "text", "type": "string", "description": "what to echo", "required": True}]

        def call(self, params, **kwargs):
            return self._verify_json_format_args(params)["text"]

    @register_tool("port_echo", allow_overwrite=True)
    class Echo2(Echo):
        pass

    tool = TOOL_REGISTRY["port_echo"]()
    assert isinstance(tool, Echo2) and tool.call('{"text": "hi"}') == "hi"
    try:
        tool.call("{}")
        raise AssertionError("missing required arguments must raise")
    except ValueError:
        pass
    retrieval = TOOL_REGISTRY["retrieval"]({"max_ref_token": 1000})
    assert retrieval.name == "retrieval" and "query" in retrieval.function["parameters"]["properties"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
