"""Qwen-Agent's file-reading tools: BaseToolWithFileAccess, and tools given the conversation's files as `files=`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chatagent.agents import FnCallAgent
from chatagent.tools.base import BaseTool, BaseToolWithFileAccess, register_tool  # Qwen-Agent's path (issue 43.12)
from tests.support.file_server import FileServer
from tests.support.openai_server import OpenAIServer, Reply


class RowCounter(BaseToolWithFileAccess):
    """A data-analysis tool written the Qwen-Agent way."""

    name = "row_counter"
    description = "Count the data rows of every CSV file the user gave."
    parameters = {"type": "object", "properties": {}, "required": []}

    def call(self, params: str | dict, files: list[str] | None = None, **kwargs: Any) -> str:
        super().call(params, files=files, **kwargs)
        counts = {}
        for name in sorted(os.listdir(self.work_dir)):
            with open(os.path.join(self.work_dir, name)) as f:
                counts[name] = sum(1 for _ in f) - 1
        return json.dumps({"files": files, "rows": counts})


def _llm(server: OpenAIServer) -> dict[str, Any]:
    return {"model": "m", "model_server": server.base_url, "api_key": "k"}


def test_a_file_tool_gets_the_conversations_files_copied_into_its_work_dir(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("day,amount\n1,10\n2,20\n3,30\n")
    (data / "remote.csv").write_text("x\n1\n2\n")
    work_dir = tmp_path / "work"
    openai_server.add(Reply(tool_calls=[("row_counter", {})]), "sales.csv has 3 rows, remote.csv 2.")
    with FileServer(data) as files_server:
        remote = files_server.url("remote.csv")
        bot = FnCallAgent(llm=_llm(openai_server), function_list=[RowCounter({"work_dir": str(work_dir)})])
        messages = [{"role": "user", "content": [{"text": "How many rows?"}, {"file": str(data / "sales.csv")},
                                                 {"file": remote}]}]  # fmt: skip
        *_, response = bot.run(messages)
    result = json.loads(response[1]["content"])
    assert result["files"] == [str(data / "sales.csv"), remote]
    assert result["rows"] == {"remote.csv": 2, "sales.csv": 3}
    assert response[-1]["content"] == "sales.csv has 3 rows, remote.csv 2."
    assert (work_dir / "sales.csv").read_text() == (data / "sales.csv").read_text()


def test_the_agents_own_files_reach_the_tool_and_other_tools_get_no_files(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    own = tmp_path / "own.csv"
    own.write_text("a\n1\n")
    seen: dict[str, Any] = {}

    @register_tool("kwargs_probe_qwentools")
    class Probe(BaseTool):
        parameters = {"type": "object", "properties": {}, "required": []}

        def call(self, params: str | dict, **kwargs: Any) -> str:
            seen.update(kwargs)
            return "ok"

    openai_server.add(Reply(tool_calls=[("row_counter", {}), ("kwargs_probe_qwentools", {})]), "done")
    tool = RowCounter({"work_dir": str(tmp_path / "work")})
    bot = FnCallAgent(llm=_llm(openai_server), function_list=[tool, "kwargs_probe_qwentools"], files=[str(own)])
    *_, response = bot.run([{"role": "user", "content": "count"}])
    counted = next(m for m in response if m["role"] == "function" and m["name"] == "row_counter")
    assert json.loads(counted["content"])["rows"] == {"own.csv": 1}
    assert "files" not in seen and "messages" in seen
    assert tool.file_access and not Probe().file_access


def test_a_file_that_cannot_be_copied_is_skipped_and_the_tool_still_runs(tmp_path: Path) -> None:
    tool = RowCounter({"work_dir": str(tmp_path / "work")})
    good = tmp_path / "good.csv"
    good.write_text("a\n1\n2\n")
    result = json.loads(tool.call("{}", files=[str(tmp_path / "missing.csv"), str(good)]))
    assert result["rows"] == {"good.csv": 2}
