"""Qwen-Agent examples/group_chat_demo.py, its chat loop: one response per call (need_batch_response=False), the
@mentioned participants speaking in order (mentioned_agents_name)."""

from chatagent.agents import GroupChat
from chatagent.agents.user_agent import PENDING_USER_INPUT
from chatagent.schema import ContentItem, Message

SOURCE = "examples/group_chat_demo.py"
MODEL = [{"say": "@大头 你觉得呢？"}, {"say": "我觉得运动最重要。"}]
CFGS = {
    "background": "一个陌生人互帮互助群聊",
    "agents": [
        {"name": "小塘", "description": "一个勤劳的打工人（这是一个真实用户）", "is_human": True},
        {"name": "ikun", "description": "熟悉蔡徐坤的动态", "instructions": "你是蔡徐坤的粉丝，说话很简短", "knowledge_files": [],
         "selected_tools": []},
        {"name": "大头", "description": "是一个体育生，不喜欢追星", "instructions": "你是一个体育生，热爱运动", "knowledge_files": [],
         "selected_tools": []},
    ],
}  # fmt: skip


def main(server: str, resources: str) -> None:
    bot = GroupChat(agents=CFGS, llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    messages = [Message("user", content=[ContentItem(text="@ikun 大家好")], name="小塘")]
    mentioned_agents_name = []
    for _ in range(2):
        content = "\n".join(x.text if x.text else "" for x in messages[-1].content) if isinstance(
            messages[-1].content, list) else messages[-1].content.strip()  # fmt: skip
        if "@" in content:
            for x in content.split("@"):
                for agent in CFGS["agents"]:
                    if x.startswith(agent["name"]):
                        if agent["name"] not in mentioned_agents_name:
                            mentioned_agents_name.append(agent["name"])
                        break
        response = []
        for response in bot.run(messages, need_batch_response=False, mentioned_agents_name=mentioned_agents_name):
            if response and response[-1].content == PENDING_USER_INPUT:
                break
        assert response, "No one wants to talk anymore!"
        assert response[-1].name == mentioned_agents_name[0]
        mentioned_agents_name.pop(0)
        messages.extend(response)
    assert [m.name for m in messages] == ["小塘", "ikun", "大头"]
    assert messages[-1].content == "我觉得运动最重要。"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
