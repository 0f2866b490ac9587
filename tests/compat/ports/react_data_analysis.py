"""Qwen-Agent examples/react_data_analysis.py: ReActChat with a CSV file in the user's message (the example's
code_interpreter, which needs Docker in Qwen-Agent, replaced by a local tool that reads the file)."""

import csv
import json
import os

from chatagent.agents import ReActChat
from chatagent.tools.base import BaseTool, register_tool

SOURCE = "examples/react_data_analysis.py"
MODEL = [
    {"call": [["csv_head", {"path": "stock_prices.csv", "rows": 3}]], "think": "First look at the file."},
    {"say": "The close rose from 102.5 to 131.0 over the period."},
]


@register_tool("csv_head", allow_overwrite=True)
class CsvHead(BaseTool):
    description = "Read the first rows of a CSV file the user uploaded."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "rows": {"type": "integer"}},
        "required": ["path"],
    }

    def call(self, params: str, **kwargs) -> str:
        args = json.loads(params)
        files = [item["file"] for m in kwargs["messages"] if isinstance(m["content"], list) for item in m["content"]
                 if item.get("file")]  # fmt: skip
        path = next(f for f in files if os.path.basename(f) == os.path.basename(args["path"]))
        with open(path) as f:
            return json.dumps(list(csv.reader(f))[: args.get("rows", 5) + 1])


def main(server: str, resources: str) -> None:
    llm_cfg = {"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}
    bot = ReActChat(
        llm=llm_cfg,
        name="code interpreter",
        description="This agent can run code to solve the problem",
        function_list=["csv_head"],
    )
    query = "pd.head the file first and then help me draw a line chart to show the changes in stock prices"
    messages = [{"role": "user", "content": [{"text": query}, {"file": os.path.join(resources, "stock_prices.csv")}]}]
    response = []
    for response in bot.run(messages):
        print(response)
    assert "131.0" in response[-1]["content"]
    assert response[-1]["name"] == "code interpreter"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
