"""An agent as another agent's tool: a nested run streamed to the caller's consumer, marked and never sent to a
model; usage counted in the caller's run; the sub-agent's plugins and approval apply inside; a failure becomes the
tool's error result. On ScriptedLLM, and over real HTTP against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio

import pytest

from chatagent import (
    FnCallAgent,
    ModelServiceError,
    Plugin,
    ScriptedLLM,
    TextPolicy,
    approval_message,
    pending_approval,
    tool,
)
from chatagent.llm.prepare import untrusted
from chatagent.llm.scripted import tool_call
from chatagent.run.nested import NESTED
from tests.support.openai_server import Reply

ASK = [{"role": "user", "content": "How long is the Nile?"}]


def _team(sub_replies, boss_replies, **sub_kwargs):
    sub_llm, boss_llm = ScriptedLLM(sub_replies), ScriptedLLM(boss_replies)
    researcher = FnCallAgent(llm=sub_llm, name="researcher", description="Finds facts.", **sub_kwargs)
    boss = FnCallAgent(llm=boss_llm, name="boss", function_list=[researcher])
    return researcher, boss, sub_llm, boss_llm


def test_the_sub_agent_streams_as_a_nested_run_apart_from_the_answer():
    _, boss, sub_llm, boss_llm = _team(
        ["The Nile is 6650 km long."], [tool_call("researcher", {"task": "Length of the Nile?"}), "6650 km."]
    )
    run = boss.run(ASK, delta_stream=True)
    pieces = list(run)
    nested = [f for step in pieces for f in step if f.get("name") == "researcher" and f["role"] == "assistant"]
    assert nested and nested[0]["extra"][NESTED] == "call_1_0"  # streamed piece by piece, the first piece marked
    assert len(nested) > 1
    from chatagent import merge_delta

    response: list = []
    for step in pieces:
        merge_delta(response, step)
    assert [(m["role"], m.get("name")) for m in response] == [
        ("assistant", "boss"),
        ("assistant", "researcher"),
        ("function", "researcher"),
        ("assistant", "boss"),
    ]
    assert response[1]["extra"][NESTED] == response[0]["extra"]["function_id"]
    assert response[2]["content"] == "The Nile is 6650 km long."
    assert response[3]["content"] == "6650 km."  # the caller's answer is its own
    # the sub-agent was given the task; the caller's model never saw the nested messages
    assert sub_llm.calls[0].messages[-1].content == "Length of the Nile?"
    seen = boss_llm.calls[1].messages
    assert [m.role for m in seen] == ["user", "assistant", "function"]
    assert run.usage.calls == 3  # the sub-agent's model call counts in the caller's run


def test_usage_and_answer_on_a_fresh_team():
    _, boss, sub_llm, _ = _team(["Answer."], [tool_call("researcher", {"task": "t"}), "Done."])
    run = boss.run(ASK)
    last = list(run)[-1]
    assert last[-1]["content"] == "Done."
    assert run.usage.calls == 3 and run.usage.completion_tokens > 0
    sub_llm.assert_complete()


def test_a_failing_sub_agent_is_the_tool_error_result():
    boom = ModelServiceError(400, "the sub-agent's model refused", retryable=False)
    _, boss, _, boss_llm = _team([boom], [tool_call("researcher", {"task": "t"}), "Sorry."])
    rsp = boss.run_nonstream(ASK)
    result = [m for m in rsp if m["role"] == "function"][0]
    assert result["content"].startswith("Error: researcher failed: ModelServiceError")
    # the model reads the error, marked as untrusted data like any tool result
    assert boss_llm.calls[1].messages[-1].content == untrusted(result["content"], "tool researcher")
    assert rsp[-1]["content"] == "Sorry."


def test_the_sub_agents_plugins_apply_inside():
    class Shout(Plugin):
        def after_run(self, agent, response):
            return [m.copy(content=m.content.upper()) if m.role == "assistant" else m for m in response]

    _, boss, _, boss_llm = _team(["quiet answer"], [tool_call("researcher", {"task": "t"}), "ok"], plugins=[Shout()])
    rsp = boss.run_nonstream(ASK)
    assert [m for m in rsp if m["role"] == "function"][0]["content"] == "QUIET ANSWER"
    assert boss_llm.calls[1].messages[-1].content == untrusted("QUIET ANSWER", "tool researcher")


def test_approval_inside_pauses_the_caller_and_resumes_the_sub_agent():
    ran = []

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: which file.
        """
        ran.append(path)
        return f"deleted {path}"

    sub = [tool_call("delete_file", {"path": "a.txt"}), "a.txt is gone."]
    _, boss, sub_llm, _ = _team(sub, [tool_call("researcher", {"task": "delete a.txt"}), "Done: a.txt deleted."],
                                function_list=[delete_file])  # fmt: skip
    first = boss.run_nonstream(ASK)
    waiting = pending_approval(first)
    assert waiting and waiting[0]["name"] == "delete_file" and not ran
    assert first[-1]["name"] == "researcher" and NESTED in first[-1]["extra"]
    second = boss.run_nonstream(ASK + first + [approval_message(True)])
    assert ran == ["a.txt"]
    assert [m["content"] for m in second if m["role"] == "function"] == ["deleted a.txt", "a.txt is gone."]
    assert second[-1] == {"role": "assistant", "content": "Done: a.txt deleted.", "name": "boss"}
    sub_llm.assert_complete()


def test_as_tool_names_and_describes_and_runs_in_arun():
    sub_llm, boss_llm = ScriptedLLM(["Paris."]), ScriptedLLM([tool_call("geo", {"task": "capital"}), "Paris it is."])
    geo = FnCallAgent(llm=sub_llm, name="geographer")
    t = geo.as_tool(name="geo", description="Knows capitals.")
    assert t.function["name"] == "geo" and t.function["description"] == "Knows capitals."
    boss = FnCallAgent(llm=boss_llm, function_list=[t])

    async def go():
        out = None
        async for rsp in boss.arun(ASK):
            out = rsp
        return out

    out = asyncio.run(go())
    assert [m["content"] for m in out if m["role"] == "function"] == ["Paris."]
    assert out[-1]["content"] == "Paris it is."


def test_an_agent_without_a_usable_name_needs_one():
    with pytest.raises(ValueError, match="as_tool"):
        FnCallAgent(llm=ScriptedLLM([]), function_list=[FnCallAgent(llm=ScriptedLLM([]))])


@pytest.mark.timeout(60)
def test_agent_as_tool_over_http(openai_server):
    cfg = {"model": "m", "model_server": openai_server.base_url, "api_key": "k"}
    openai_server.add(
        Reply(tool_calls=[("researcher", {"task": "Length of the Nile?"})]),
        Reply(text="About 6650 km.", chunk_size=3),
        Reply(text="The Nile is about 6650 km long."),
    )
    researcher = FnCallAgent(llm=cfg, name="researcher")
    boss = FnCallAgent(llm=cfg, name="boss", function_list=[researcher])
    run = boss.run(ASK)
    rsp = list(run)[-1]
    assert [m.get("name") for m in rsp] == ["boss", "researcher", "researcher", "boss"]
    assert rsp[2]["content"] == "About 6650 km." and rsp[-1]["content"] == "The Nile is about 6650 km long."
    assert run.usage.calls == 3


@pytest.mark.parametrize("per", ["answer", "sentence"])
def test_under_the_callers_output_checks_the_nested_messages_keep_their_agents_name(per):
    _, boss, _, _ = _team(["The Nile is long. It is 6650 km."], [tool_call("researcher", {"task": "t"}), "6650 km."])
    boss.plugins = [TextPolicy(redact=[r"\d{4} km"], replacement="[n] km", per=per)]
    seen = [list(r) for r in boss.run(ASK)]
    nested_ones = [m for m in seen[-1] if NESTED in (m.get("extra") or {})]
    assert [m["name"] for m in nested_ones] == ["researcher"]
    assert nested_ones[0]["content"] == "The Nile is long. It is [n] km."  # the caller's checks apply to it too
    assert all(m["name"] == "researcher" for r in seen for m in r if NESTED in (m.get("extra") or {}))
    assert seen[-1][-1] == {"role": "assistant", "content": "[n] km.", "name": "boss"}
