"""Qwen-Agent's Assistant given knowledge by the caller (`bot.run(messages, knowledge=...)`, as its RAG examples do
with their own retrieval): the knowledge reaches the model in the system message, under "# Knowledge Base", as text
or as retrieval results ({'url': ..., 'text': [snippets]})."""

from chatagent.agents import Assistant

SOURCE = "qwen_agent/agents/assistant.py (Assistant._run's knowledge argument)"
MODEL = []
RULES = [
    ("contains", ["# Knowledge Base", "## The content from 上传的文档:", "The vault code is 4242."], "It is 4242."),
    ("contains", ["# Knowledge Base", "## The content from [文件](handbook.pdf):", "Badges\n\n...\n\nare blue"],
     "They are blue."),
    ("contains", ["# 知识库", "## 来自 上传的文档 的内容：", "金库密码是 4242。"], "是 4242。"),
]  # fmt: skip


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    bot = Assistant(llm=llm_cfg, system_message="You are a careful assistant.")

    messages = [{"role": "user", "content": "What is the vault code?"}]
    *_, response = bot.run(messages, knowledge="The vault code is 4242.")
    assert response[-1]["content"] == "It is 4242.", response
    assert messages == [{"role": "user", "content": "What is the vault code?"}]

    docs = [{"url": "https://example.com/files/handbook.pdf", "text": ["Badges", "are blue"]}]
    *_, response = bot.run([{"role": "user", "content": "What colour are badges?"}], knowledge=docs)
    assert response[-1]["content"] == "They are blue.", response

    *_, response = bot.run([{"role": "user", "content": "金库密码是多少？"}], lang="zh", knowledge="金库密码是 4242。")
    assert response[-1]["content"] == "是 4242。", response


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
