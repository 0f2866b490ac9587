"""Call a model directly, without an agent: streaming, then not.

    python examples/llm_direct.py

The model comes from the environment (see examples/basic_chat.py); `get_chat_model(None)` picks it.
To name a server yourself:
    get_chat_model({'model': 'qwen2.5-7b-instruct', 'model_server': 'http://127.0.0.1:8000/v1', 'api_key': 'EMPTY'})
"""

from __future__ import annotations

from chatagent import Usage, get_chat_model


def main() -> None:
    llm = get_chat_model(None)
    usage = Usage()
    messages = [{"role": "user", "content": "Write a haiku about streaming text."}]

    print("streaming:")
    printed = 0
    for response in llm.chat(messages, stream=True, usage=usage):  # each yield: the whole answer so far
        text = response[0]["content"]  # dicts in, dicts out
        print(text[printed:], end="", flush=True)
        printed = len(text)
    print()

    print("non-streaming:")
    messages = [{"role": "user", "content": "Now the same haiku, in French."}]
    reply = llm.chat(messages, stream=False, extra_generate_cfg={"temperature": 0.2}, usage=usage)
    print(reply[0]["content"])
    print(f"tokens: {usage.prompt_tokens} in, {usage.completion_tokens} out, {usage.calls} calls")


if __name__ == "__main__":
    main()
