"""Qwen-Agent examples/function_calling.py: the LLM layer with dict messages and functions, the caller runs the
function and sends its result back."""

import json

from chatagent.llm import get_chat_model

SOURCE = "examples/function_calling.py"
MODEL = [
    {"call": [["get_current_weather", {"location": "San Francisco, CA"}]]},
    {"say": "It is 72 degrees Fahrenheit in San Francisco."},
]


def get_current_weather(location, unit="fahrenheit"):
    """Get the current weather in a given location"""
    if "tokyo" in location.lower():
        return json.dumps({"location": "Tokyo", "temperature": "10", "unit": "celsius"})
    elif "san francisco" in location.lower():
        return json.dumps({"location": "San Francisco", "temperature": "72", "unit": "fahrenheit"})
    return json.dumps({"location": location, "temperature": "unknown"})


def main(server: str, resources: str, fncall_prompt_type: str = "nous") -> None:
    llm = get_chat_model(
        {
            "model": "qwen-plus-latest",
            "model_server": server,
            "api_key": "EMPTY",
            "generate_cfg": {"fncall_prompt_type": fncall_prompt_type},
        }
    )
    messages = [{"role": "user", "content": "What's the weather like in San Francisco?"}]
    functions = [
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
    responses = []
    for responses in llm.chat(messages=messages, functions=functions, stream=True):
        print(json.dumps(responses, ensure_ascii=False))
    messages.extend(responses)
    last_response = messages[-1]
    assert last_response.get("function_call", None)
    function_name = last_response["function_call"]["name"]
    function_args = json.loads(last_response["function_call"]["arguments"])
    function_response = get_current_weather(location=function_args.get("location"), unit=function_args.get("unit"))
    messages.append({"role": "function", "name": function_name, "content": function_response})
    for responses in llm.chat(messages=messages, functions=functions, stream=True):
        print(json.dumps(responses, ensure_ascii=False))
    assert responses[-1]["content"] == "It is 72 degrees Fahrenheit in San Francisco."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
