"""Qwen-Agent examples/group_chat_chess.py: a group chat from a config with a real person in it; the host picks
speakers until it is the person's turn."""

from chatagent.agents import GroupChat
from chatagent.agents.user_agent import PENDING_USER_INPUT
from chatagent.schema import Message

SOURCE = "examples/group_chat_chess.py"
NPC_NAME = "小明"
USER_NAME = "小塘"
MODEL = [
    {"say": "棋盘"},
    {"say": "[[0,0,0,0,0],[0,1,0,0,0],[0,0,0,0,0],[0,0,0,0,0],[0,0,0,0,0]]"},
    {"say": NPC_NAME},
    {"say": "<2,2>"},
    {"say": USER_NAME},
]
CFGS = {
    "background": f"一个五子棋群组，棋盘为5*5，黑棋玩家和白棋玩家交替下棋。{NPC_NAME}下白棋，{USER_NAME}下黑棋。",
    "agents": [
        {
            "name": "棋盘",
            "description": "负责更新棋盘",
            "instructions": "你扮演一个五子棋棋盘，根据原始棋盘和玩家下棋的位置坐标，把新的棋盘用矩阵展示出来。",
        },
        {
            "name": NPC_NAME,
            "description": "白棋玩家",
            "instructions": "你扮演一个玩五子棋的高手，你下白棋。返回格式为坐标：\n<i,j>\n除了这个坐标，不要返回其他任何内容",
        },
        {"name": USER_NAME, "description": "黑棋玩家", "is_human": True},
    ],
}


def main(server: str, resources: str) -> None:
    bot = GroupChat(agents=CFGS, llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    messages = [Message("user", "<1,1>", name=USER_NAME)]
    response = []
    for response in bot.run(messages=messages):
        print("bot response:", response)
    assert [m.name for m in response] == ["棋盘", NPC_NAME, USER_NAME]
    assert response[1].content == "<2,2>"
    assert response[-1].content == PENDING_USER_INPUT


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
