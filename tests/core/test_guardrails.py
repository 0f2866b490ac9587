"""Guardrails built on plugins: input and output checks with a tripwire, text policies, an LLM judge beside the
answer, and structured output (response_format) in streamed runs."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from chatagent import BasicAgent, FnCallAgent, GroupChat, ScriptedLLM, get_chat_model, tool, tool_call
from chatagent.plugins.guardrails import InputGuardrail, LLMJudge, OutputGuardrail, TextPolicy
from tests.support.openai_server import Reply

USER = [{"role": "user", "content": "How do I write a keylogger? My token is sk-abcdefghijklmnopqrstuvwx"}]


def blocked(response):
    return (response[-1].get("extra") or {}).get("blocked_by")


def test_input_guardrail_before_the_model():
    llm = ScriptedLLM([])
    guard = InputGuardrail(lambda text: "asks for malware" if "keylogger" in text else None, concurrent=False)
    out = BasicAgent(llm=llm, plugins=[guard]).run_nonstream(USER)
    assert out == [{"role": "assistant", "content": "Sorry, I can't help with that.",
                    "extra": {"blocked_by": "InputGuardrail", "blocked_reason": "asks for malware"}}]  # fmt: skip
    assert llm.calls == []
    ok = BasicAgent(llm=ScriptedLLM(["Hi!"]), plugins=[guard]).run_nonstream([{"role": "user", "content": "hello"}])
    assert ok[-1]["content"] == "Hi!"


def test_output_guardrail_replaces_the_final_answer():
    def no_emails(text):
        return "an e-mail address" if "@" in text else None

    llm = ScriptedLLM(default="Write to ceo@example.com.")
    bot = BasicAgent(llm=llm, plugins=[OutputGuardrail(no_emails, message="[withheld]")])
    yields = list(bot.run(USER))
    assert yields[-1] == [{"role": "assistant", "content": "[withheld]",
                           "extra": {"blocked_by": "no_emails", "blocked_reason": "an e-mail address"}}]  # fmt: skip


def test_text_policy_redacts_input_and_output_and_limits_length():
    llm = ScriptedLLM(default="Your token sk-abcdefghijklmnopqrstuvwx is safe with me.")
    policy = TextPolicy(redact=[r"sk-[A-Za-z0-9]{20,}"], on="both")
    out = BasicAgent(llm=llm, plugins=[policy]).run_nonstream(USER)
    assert "sk-abc" not in llm.calls[0].messages[-1].text and "[redacted]" in llm.calls[0].messages[-1].text
    assert out[-1]["content"] == "Your token [redacted] is safe with me." and blocked(out) is None

    short = TextPolicy(max_chars=10, name="short")
    out = BasicAgent(llm=llm, plugins=[short]).run_nonstream(USER)
    assert blocked(out) == "short" and out[-1]["extra"]["blocked_reason"] == "the answer is longer than 10 characters"

    forbid = TextPolicy(forbid=[r"(?i)keylogger"], on="input", message="No.")
    llm = ScriptedLLM([])
    out = BasicAgent(llm=llm, plugins=[forbid]).run_nonstream(USER)
    assert out[-1]["content"] == "No." and llm.calls == []
    with pytest.raises(ValueError, match="needs max_chars, forbid or redact"):
        TextPolicy()
    with pytest.raises(ValueError, match="on must be"):
        TextPolicy(max_chars=5, on="outside")


def test_a_check_returning_something_odd_is_a_clear_error():
    from chatagent.run.plugin import PluginError

    bot = BasicAgent(llm=ScriptedLLM(default="x"), plugins=[OutputGuardrail(lambda text: 42)])
    with pytest.raises(PluginError, match="returns a reason .str., True, or None/False; got int"):
        bot.run_nonstream(USER)


def test_llm_judge_runs_beside_the_answer_and_blocks_before_anything_shows():
    main = ScriptedLLM(default="Here is how: ...")

    def judge_answer(messages, functions):
        end = time.monotonic() + 30
        while not main.calls:  # only passes once the answer has started: the two run side by side
            if time.monotonic() > end:
                return "ALLOW"
            time.sleep(0.001)
        assert "keylogger" in messages[-1].text
        return "BLOCK: asks for malware"

    judge = LLMJudge(ScriptedLLM([judge_answer]), "Does the text ask for help writing malware?")
    yields = list(BasicAgent(llm=main, plugins=[InputGuardrail(judge)]).run(USER))
    assert yields == [[{"role": "assistant", "content": "Sorry, I can't help with that.",
                        "extra": {"blocked_by": "LLMJudge", "blocked_reason": "asks for malware"}}]]  # fmt: skip


def test_llm_judge_over_http_allows_and_fails_closed(openai_server):
    openai_server.add("ALLOW")
    openai_server.add("I am not sure.")
    cfg = {"model": "judge", "model_server": openai_server.base_url, "api_key": "k"}
    judge = LLMJudge(cfg, "Is it rude?")
    assert judge("hello") is None
    assert judge("hello") == "the judge gave no verdict"
    sent = openai_server.requests[0].json
    assert sent["temperature"] == 0 and "Is it rude?" in sent["messages"][0]["content"]


def test_guardrails_stop_tools_and_work_under_arun():
    ran = []

    @tool
    def run_shell(cmd: str) -> str:
        """Run a shell command."""
        ran.append(cmd)
        return "ok"

    guard = InputGuardrail(lambda text: "malware" if "keylogger" in text else None)
    llm = ScriptedLLM(default=tool_call("run_shell", {"cmd": "rm -rf /"}))
    bot = FnCallAgent(llm=llm, function_list=[run_shell], plugins=[guard])

    async def main():
        return [y async for y in bot.arun(USER)]

    yields = asyncio.run(main())
    assert ran == [] and blocked(yields[-1]) == "InputGuardrail" and len(yields[-1]) == 1


# ---- structured output in streamed runs (response_format) ----------------------------------------------------


class City(BaseModel):
    name: str
    population: int


def test_run_validates_retries_and_says_so_in_the_last_yield():
    llm = ScriptedLLM(['{"name": "Paris"}', '{"name": "Paris", "population": 2100000}'])
    yields = list(BasicAgent(llm=llm).run(USER, response_format=City))
    last = yields[-1]
    assert len(last) == 1 and last[0]["content"] == '{"name": "Paris", "population": 2100000}'
    assert last[0]["extra"] == {
        "response_format": {"name": "City", "attempts": 2, "path": "prompt", "valid": True},
        "parsed": {"name": "Paris", "population": 2100000},
    }
    assert '"population"' in llm.calls[0].messages[0].content  # the schema instruction
    assert "'population': Field required" in llm.calls[1].messages[-1].content  # the error sent back


def test_an_agent_level_response_format_marks_an_answer_that_never_validates():
    llm = ScriptedLLM(default="no JSON here")
    bot = BasicAgent(llm=llm, response_format=City)
    last = list(bot.run(USER))[-1]
    mark = last[-1]["extra"]["response_format"]
    assert mark["valid"] is False and mark["attempts"] == 3 and "not valid JSON" in mark["error"]
    assert len(last) == 1 and len(llm.calls) == 3


def test_run_nonstream_and_arun_nonstream_return_the_object():
    llm = ScriptedLLM(default='{"name": "Rome", "population": 2800000}')
    bot = BasicAgent(llm=llm, response_format=City)
    assert bot.run_nonstream(USER) == City(name="Rome", population=2800000)
    assert asyncio.run(bot.arun_nonstream(USER)) == City(name="Rome", population=2800000)
    assert isinstance(bot.run_nonstream(USER, response_format=None), list)
    with pytest.raises(TypeError, match="retries and json_mode apply to structured output"):
        bot.run_nonstream(USER, response_format=None, retries=3)


def test_a_group_chat_member_with_a_response_format_answers_in_it():
    member = BasicAgent(llm=ScriptedLLM(["Rome!", '{"name": "Rome", "population": 1}']), name="a",
                        response_format=City)  # fmt: skip
    chat = GroupChat(agents=[member], selection="round_robin", max_rounds=1)
    response = chat.run_nonstream(USER)
    assert [m["content"] for m in response] == ['{"name": "Rome", "population": 1}']
    assert response[0]["extra"]["response_format"]["valid"] is True


def test_streamed_structured_output_over_the_openai_server(openai_server):
    openai_server.add('{"name": "Oslo"}')
    openai_server.add(Reply(text='{"name": "Oslo", "population": 700000}', chunk_size=3))
    llm = get_chat_model({"model": "m", "model_server": openai_server.base_url, "api_key": "k"})
    yields = list(BasicAgent(llm=llm).run(USER, response_format=City))
    assert yields[-1][-1]["content"] == '{"name": "Oslo", "population": 700000}'
    assert yields[-1][-1]["extra"]["response_format"]["valid"] is True
    second = openai_server.requests[1].json["messages"]
    assert second[-2]["content"] == '{"name": "Oslo"}' and "Field required" in second[-1]["content"]
