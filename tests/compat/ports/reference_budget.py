"""Qwen-Agent's Assistant with its default reference budget (max_ref_token 20000, qwen_agent/settings.py): a
12-page report fits, so the model reads all of it and can summarise it, first section to last."""

import os

from chatagent.agents import Assistant

SOURCE = "qwen_agent/agents/assistant.py, qwen_agent/settings.py (DEFAULT_MAX_REF_TOKEN)"
WHOLE = ["Section 1.", "Section 5.", "Section 9.", "4242"]
RULES = ["keywords", ("contains", WHOLE, "Twelve sections of steady progress; section 9 gives the vault code 4242.")]
MODEL = []


def main(server: str, resources: str) -> None:
    bot = Assistant(llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"})
    messages = [
        {
            "role": "user",
            "content": [{"text": "Summarise the report."}, {"file": os.path.join(resources, "report.pdf")}],
        }
    ]
    *_, last = bot.run(messages)
    assert "vault code 4242" in last[-1]["content"], last[-1]["content"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
