"""Qwen-Agent examples/function_calling_in_parallel.py: the qwen prompt format, three calls in one reply."""

import json

from chatagent.llm import get_chat_model

SOURCE = "examples/function_calling_in_parallel.py"
MODEL = [
    {
        "call": [
            ["get_current_weather", {"location": "San Francisco"}],
            ["get_current_weather", {"location": "Tokyo"}],
            ["get_current_weather", {"location": "Paris"}],
        ]
    },
    {"say": "San Francisco 72F, Tokyo 10C, Paris 22C."},
]


def get_current_weather(location, unit="fahrenheit"):
    """Get the current weather in a given location"""
    table = {"tokyo": ("Tokyo", "10", "celsius"), "san francisco": ("San Francisco", "72", "fahrenheit")}
    table["paris"] = ("Paris", "22", "celsius")
    for key, (name, temperature, unit) in table.items():
        if key in location.lower():
            return json.dumps({"location": name, "temperature": temperature, "unit": unit})
    return json.dumps({"location": location, "temperature": "unknown"})


def main(server: str, resources: str) -> None:
    llm = get_chat_model(
        {
            "model": "qwen-plus-latest",
            "model_server": server,
            "api_key": "EMPTY",
            "generate_cfg": {"fncall_prompt_type": "qwen"},
        }
    )
    messages = [{"role": "user", "content": "What's the weather like in San Francisco? And what about Tokyo? Paris?"}]
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
    for responses in llm.chat(
        messages=messages,
        functions=functions,
        stream=True,
        extra_generate_cfg=dict(max_input_tokens=6500, parallel_function_calls=True),
    ):
        print(responses)
    messages.extend(responses)
    fncall_msgs = [rsp for rsp in responses if rsp.get("function_call", None)]
    assert len(fncall_msgs) == 3
    for msg in fncall_msgs:
        function_name = msg["function_call"]["name"]
        function_args = json.loads(msg["function_call"]["arguments"])
        function_response = get_current_weather(location=function_args.get("location"), unit=function_args.get("unit"))
        messages.append({"role": "function", "name": function_name, "content": function_response})
    for responses in llm.chat(
        messages=messages,
        functions=functions,
        extra_generate_cfg={"max_input_tokens": 6500, "parallel_function_calls": True},
        stream=True,
    ):
        print(responses)
    assert "Tokyo 10C" in responses[-1]["content"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
