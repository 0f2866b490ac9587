"""Qwen-Agent examples/group_chat_demo.py, its "Create" tab: GroupChatCreator designs the roles; the demo reads the
messages named 'background' and 'role_config' into a config."""

import json

import json5

from chatagent.agents import GroupChatCreator
from chatagent.schema import Message

SOURCE = "examples/group_chat_demo.py (app_create)"
CONFIG = {
    "name": "小红书写作专家",
    "description": "我会写小红书爆款",
    "instructions": "你是小红书爆款写作专家，先产5个标题，再产正文。",
}
MODEL = [
    {
        "say": "<Background>: 一个写作交流群。\n<Config>: " + json.dumps(CONFIG, ensure_ascii=False)
        + "\n<Answer>: 你希望这个角色还有什么特点？"
    }
]  # fmt: skip


def main(server: str, resources: str) -> None:
    agent = GroupChatCreator(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    new_cfgs = {"background": "", "agents": []}
    messages_create = [Message("user", "创建一个写作群")]
    response = []
    display_content = ""
    for response in agent.run(messages=messages_create):
        display_content = ""
        for rsp in response:
            if rsp.name == "role_config":
                cfg = json5.loads(rsp.content)
                new_cfgs["agents"] = [cfg]
                display_content += f"\n\n{cfg['name']}: {cfg['description']}\n{cfg['instructions']}"
            elif rsp.name == "background":
                new_cfgs["background"] = rsp.content
                display_content += f"\n群聊背景：{rsp.content}"
            else:
                display_content += f"\n{rsp.content}"
    assert new_cfgs["agents"] == [CONFIG]
    assert new_cfgs["background"].strip() == "一个写作交流群。"
    assert display_content.strip().endswith("你希望这个角色还有什么特点？")


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
