"""Qwen-Agent-style overrides of `_call_llm`, `_call_tool` and `_detect_tool` in agents whose loop is built in
(FnCallAgent, Assistant, ReActChat): every way a Qwen-Agent user writes one, in `run()` and `arun()`, streamed.
The ports tests/compat/ports/override_*.py run the same kind of code on Qwen-Agent too."""

from __future__ import annotations

import asyncio
import json

import pytest

from chatagent import ScriptedLLM, tool, tool_call
from chatagent.agents import Assistant, FnCallAgent, ReActChat
from chatagent.schema import Message

USER = [{"role": "user", "content": "What is 2 + 3?"}]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def replies():
    return [tool_call("add", {"a": 2, "b": 3}), "The sum is five."]


class ForLoopRewrite(FnCallAgent):
    """Iterates the base call with a plain for loop and rewrites what it yields (Qwen-Agent's usual form)."""

    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        for rsp in super()._call_llm(messages, functions, stream, extra_generate_cfg):
            yield [Message("assistant", m.content.upper(), function_call=m.function_call, extra=m.extra) for m in rsp]


class ForLoopPassThrough(FnCallAgent):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = []

    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        self.seen.append(len(messages))
        for rsp in super()._call_llm(messages=messages, functions=functions, stream=stream):  # noqa: UP028
            yield rsp  # (a plain for loop, as Qwen-Agent's users write it: not the same as yield from)


class ReturnsTheBase(FnCallAgent):
    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        return super()._call_llm(messages, functions, stream, extra_generate_cfg)


class CallsTheModelItself(FnCallAgent):
    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        return self.llm.chat(messages, functions, stream=True)


class YieldsFromTheBase(FnCallAgent):
    def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
        reply = yield from super()._call_llm(messages, functions, stream, extra_generate_cfg)
        return reply


@pytest.mark.parametrize("cls", [ForLoopPassThrough, ReturnsTheBase, CallsTheModelItself, YieldsFromTheBase])
def test_an_overridden_call_llm_serves_the_built_in_loop(cls):
    bot = cls(llm=ScriptedLLM(replies(), chunk_size=3), function_list=[add])
    outs = list(bot.run(USER))
    final = outs[-1]
    assert final[0]["function_call"]["name"] == "add"
    assert final[1] == {"role": "function", "name": "add", "content": "5", "extra": final[1]["extra"]}
    assert final[-1]["content"] == "The sum is five."
    assert len(final) == 3
    assert any(len(o) == 3 and o[-1]["content"] not in ("", "The sum is five.") for o in outs), "it streams"
    if cls is ForLoopPassThrough:
        assert bot.seen == [1, 3]


def test_what_a_for_loop_override_yields_is_the_answer_and_streams():
    bot = ForLoopRewrite(llm=ScriptedLLM(replies(), chunk_size=3), function_list=[add])
    outs = list(bot.run(USER))
    assert outs[-1][-1]["content"] == "THE SUM IS FIVE."
    texts = [o[-1]["content"] for o in outs if len(o) == 3]
    assert len(texts) > 2 and all(t == t.upper() for t in texts), texts  # never the text before the rewrite
    assert outs[-1][1]["content"] == "5"


def test_an_override_gets_only_the_parameters_it_takes():
    class Narrow(FnCallAgent):
        def _call_llm(self, messages, functions=None):
            return super()._call_llm(messages, functions)

    bot = Narrow(llm=ScriptedLLM(replies()), function_list=[add])
    assert bot.run_nonstream(USER)[-1]["content"] == "The sum is five."


def test_overrides_serve_arun():
    async def main():
        bot = ForLoopRewrite(llm=ScriptedLLM(replies()), function_list=[add])
        outs = [o async for o in bot.arun(USER)]
        return outs[-1]

    assert asyncio.run(main())[-1]["content"] == "THE SUM IS FIVE."


class Vetoing(FnCallAgent):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = []

    def _call_tool(self, tool_name, tool_args="{}", **kwargs):
        self.calls.append((tool_name, tool_args, sorted(kwargs)))
        if json.loads(tool_args).get("a") == 2:
            return "Refused."
        return super()._call_tool(tool_name, tool_args, **kwargs)


def test_an_overridden_call_tool_vetoes_in_fncall_and_react():
    ran = []

    @tool
    def add_logged(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append((a, b))
        return a + b

    llm = ScriptedLLM([tool_call("add_logged", {"a": 2, "b": 3}), tool_call("add_logged", {"a": 1, "b": 1}), "ok"])
    bot = Vetoing(llm=llm, function_list=[add_logged])
    out = bot.run_nonstream(USER)
    assert [m["content"] for m in out if m["role"] == "function"] == ["Refused.", "2"]
    assert ran == [(1, 1)]
    assert all("messages" in kw for _, _, kw in bot.calls)

    class ReActVetoing(ReActChat, Vetoing):
        pass

    ran.clear()
    react = ReActVetoing(
        llm=ScriptedLLM(
            ['Thought: add\nAction: add_logged\nAction Input: {"a": 2, "b": 3}', "Thought: done\nFinal Answer: no"]
        ),
        function_list=[add_logged],
    )
    text = react.run_nonstream(USER)[-1]["content"]
    assert "Observation: Refused." in text and ran == []


def test_a_narrow_call_tool_override_and_detect_tool_override():
    class Narrow(FnCallAgent):
        def _call_tool(self, tool_name, tool_args="{}"):
            return super()._call_tool(tool_name, tool_args) + "!"

        def _detect_tool(self, message):
            if message.function_call is None and message.content.startswith("CALL "):
                name, args = message.content[5:].split(" ", 1)
                return True, name, args, ""
            return super()._detect_tool(message)

    bot = Narrow(llm=ScriptedLLM(['CALL add {"a": 4, "b": 5}', "nine"]), function_list=[add])
    out = bot.run_nonstream(USER)
    assert [m["content"] for m in out if m["role"] == "function"] == ["9!"]
    assert out[-1]["content"] == "nine"


def test_an_assistant_with_an_override_answers_from_its_files(tmp_path):
    doc = tmp_path / "notes.txt"
    doc.write_text("The vault code is 4242.")

    class Logged(Assistant):
        prompts = []

        def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
            Logged.prompts.append(messages[-1].content)
            return super()._call_llm(messages, functions, stream, extra_generate_cfg)

    bot = Logged(llm=ScriptedLLM(["It is 4242."]), files=[str(doc)])
    assert bot.run_nonstream([{"role": "user", "content": "The vault code?"}])[-1]["content"] == "It is 4242."
    assert "4242" in json.dumps(Logged.prompts, default=str)


def test_a_react_agent_with_an_overridden_call_llm():
    class Counting(ReActChat):
        calls = 0

        def _call_llm(self, messages, functions=None, stream=True, extra_generate_cfg=None):
            Counting.calls += 1
            for rsp in super()._call_llm(messages, functions, stream, extra_generate_cfg):
                yield [Message("assistant", m.content.replace("five", "5")) for m in rsp]

    llm = ScriptedLLM(
        ['Thought: add\nAction: add\nAction Input: {"a": 2, "b": 3}', "Thought: done\nFinal Answer: five"]
    )
    text = Counting(llm=llm, function_list=[add]).run_nonstream(USER)[-1]["content"]
    assert Counting.calls == 2
    assert "Observation: 5" in text and text.endswith("Final Answer: 5"), text
