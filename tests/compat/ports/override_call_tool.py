"""The usual Qwen-Agent way to add approval, auditing or post-processing to tool use: an Assistant subclass that
overrides `_call_tool(self, tool_name, tool_args='{}', **kwargs)` (here it vetoes one tool and rewrites another's
result) and `_detect_tool` (here it keeps a log). The built-in loop must call both: a vetoed tool never runs."""

import json

from chatagent.agents import Assistant
from chatagent.tools.base import BaseTool

SOURCE = "a user's Assistant subclass (qwen_agent/agents/fncall_agent.py's _call_tool and _detect_tool overridden)"
MODEL = [
    {"call": [["delete_file", {"path": "/home/me/thesis.tex"}]]},
    {"call": [["add", {"a": 2, "b": 3}]]},
    {"say": "I could not delete the file; 2 + 3 = 5."},
]
RAN = []


class DeleteFile(BaseTool):
    name = "delete_file"
    description = "Delete a file."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

    def call(self, params: str, **kwargs) -> str:
        RAN.append(("delete_file", json.loads(params)["path"]))
        return "deleted"


class Add(BaseTool):
    name = "add"
    description = "Add two numbers."
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }

    def call(self, params: str, **kwargs) -> str:
        args = json.loads(params)
        RAN.append(("add", args["a"], args["b"]))
        return str(args["a"] + args["b"])


class GuardedAssistant(Assistant):
    BLOCKED = {"delete_file"}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.audit = []
        self.detected = []

    def _detect_tool(self, message):
        use_tool, tool_name, tool_args, text = super()._detect_tool(message)
        if use_tool:
            self.detected.append(tool_name)
        return use_tool, tool_name, tool_args, text

    def _call_tool(self, tool_name: str, tool_args="{}", **kwargs):
        self.audit.append((tool_name, tool_args, "messages" in kwargs))
        if tool_name in self.BLOCKED:
            return f"Denied: {tool_name} needs a person's approval."
        result = super()._call_tool(tool_name, tool_args, **kwargs)
        return f"{result} (checked)"


def main(server: str, resources: str) -> None:
    RAN.clear()
    bot = GuardedAssistant(
        llm={"model": "qwen-max", "model_server": server, "api_key": "EMPTY"}, function_list=[DeleteFile(), Add()]
    )
    *_, response = bot.run([{"role": "user", "content": "Delete my thesis, then add 2 and 3."}])
    assert RAN == [("add", 2, 3)], RAN  # the vetoed tool never ran
    assert [(name, json.loads(args), has_messages) for name, args, has_messages in bot.audit] == [
        ("delete_file", {"path": "/home/me/thesis.tex"}, True),
        ("add", {"a": 2, "b": 3}, True),
    ], bot.audit
    assert all(isinstance(args, str) for _, args, _ in bot.audit)
    assert bot.detected == ["delete_file", "add"], bot.detected
    results = [m["content"] for m in response if m["role"] == "function"]
    assert results == ["Denied: delete_file needs a person's approval.", "5 (checked)"], results
    assert response[-1]["content"] == "I could not delete the file; 2 + 3 = 5."


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
