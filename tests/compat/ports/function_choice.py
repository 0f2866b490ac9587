"""Qwen-Agent tests/llm/test_function_content.py: function_choice 'none' offers no tools, a named choice forces a
call, and the reply to a function result."""

from chatagent.llm import get_chat_model

SOURCE = "tests/llm/test_function_content.py"
MODEL = [
    {"say": "I cannot look that up."},
    {"call": [["get_current_weather", {"location": "San Francisco, CA"}]]},
    {"say": "I have no data for San Francisco."},
]
FUNCTIONS = [
    {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    }
]


def main(server: str, resources: str) -> None:
    llm = get_chat_model(
        {"model": "qwen2.5-7b-instruct", "model_server": server, "api_key": "EMPTY",
         "generate_cfg": {"fncall_prompt_type": "qwen"}}
    )  # fmt: skip
    messages = [{"role": "user", "content": "What's the weather like in San Francisco?"}]
    responses = []
    for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True,
                              extra_generate_cfg=dict(function_choice="none")):  # fmt: skip
        print(responses)
    assert all("function_call" not in rsp for rsp in responses)

    for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True,
                              extra_generate_cfg=dict(function_choice="get_current_weather")):  # fmt: skip
        print(responses)
    messages.extend(responses)
    last_response = messages[-1]
    assert last_response.get("function_call")
    messages.append({"role": "function", "name": last_response["function_call"]["name"], "content": ""})
    for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True,
                              extra_generate_cfg=dict(function_choice="none")):  # fmt: skip
        print(responses)
    assert responses[-1]["content"] == "I have no data for San Francisco."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
