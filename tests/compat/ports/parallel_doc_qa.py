"""Qwen-Agent examples/parallel_doc_qa.py and tests/agents/test_parallel_qa.py: every part of a long document is
read at once, then the answer comes from what the readers found."""

import os

from chatagent.agents.doc_qa import ParallelDocQA

SOURCE = "examples/parallel_doc_qa.py"
RULES = ["keywords", ("members", "4242", "The vault's secret code is 4242.")]
MODEL = [{"say": "The secret code of the vault is 4242."}]


def main(server: str, resources: str) -> None:
    bot = ParallelDocQA(
        llm={
            "model": "qwen2.5-72b-instruct",
            "model_server": server,
            "api_key": "EMPTY",
            "generate_cfg": {"max_retries": 10},
        }
    )
    messages = [
        {
            "role": "user",
            "content": [
                {"text": "What is the secret code of the vault?"},
                {"file": os.path.join(resources, "report.pdf")},
            ],
        }
    ]
    rsp = []
    for rsp in bot.run(messages):
        print("bot response:", rsp)
    assert len(rsp[-1]["content"]) > 0
    assert "4242" in rsp[-1]["content"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
