"""Qwen-Agent's over-long input (qwen_agent/llm/base.py, _truncate_input_messages_roughly): one user message longer
than `max_input_tokens` is cut in the middle, its beginning and end kept, and answered."""

from chatagent.agents import Assistant

SOURCE = "qwen_agent/llm/base.py (_truncate_input_messages_roughly)"
RULES = [("contains", ["BEGIN-MARK", "END-MARK"], "Both ends of your message reached me.")]
MODEL = []


def main(server: str, resources: str) -> None:
    cfg = {"max_input_tokens": 1000}
    bot = Assistant(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY", "generate_cfg": cfg})
    text = "BEGIN-MARK Please read all of this. " + "The quarterly figures were steady in every region. " * 600
    messages = [{"role": "user", "content": text + "What does the END-MARK mean?"}]
    *_, last = bot.run(messages)
    assert last[-1]["content"] == "Both ends of your message reached me.", last[-1]["content"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
