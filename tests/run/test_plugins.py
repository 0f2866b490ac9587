"""Plugins: hooks around a run, its model calls and its tool calls; blocks, rewrites and retries in the last yield;
input checks beside the answer; order and errors."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time

import pytest

from chatagent import BasicAgent, FnCallAgent, ScriptedLLM, merge_delta, tool, tool_call
from chatagent.agents.group_chat import GroupChat
from chatagent.llm.prepare import untrusted
from chatagent.run.plugin import Blocked, Plugin, PluginError, Retry
from tests.support import processes

USER = [{"role": "user", "content": "My key is sk-abcdefghijklmnopqrstuvwx, what is it for?"}]
SECRET = re.compile(r"sk-[A-Za-z0-9]{20,}")


class Redact(Plugin):
    def before_run(self, agent, messages):
        return [m.copy(content=SECRET.sub("[secret]", m.text)) if m.role == "user" else m for m in messages]


class Shout(Plugin):
    def after_run(self, agent, response):
        return response[:-1] + [response[-1].copy(content=response[-1].text.upper())]


class Refuse(Plugin):
    name = "no-paris"

    def after_run(self, agent, response):
        if "Paris" in response[-1].text:
            raise Blocked("I cannot talk about that city.", reason="mentions Paris")


def runs(bot, messages=USER, **kwargs):
    """(every cumulative yield, the last delta-mode response folded, run_nonstream's response)."""
    yields = list(bot.run(messages, **kwargs))
    folded: list = []
    for d in bot.run(messages, delta_stream=True, **kwargs):
        merge_delta(folded, d)
    return yields, folded, bot.run_nonstream(messages, **kwargs)


def test_before_run_rewrites_what_the_model_sees_not_the_callers_messages():
    llm = ScriptedLLM(["It is an API key."])
    given = [dict(m) for m in USER]
    BasicAgent(llm=llm, plugins=[Redact()]).run_nonstream(given)
    assert llm.calls[0].messages[-1].text == "My key is [secret], what is it for?"
    assert given == USER


def test_after_run_rewrite_is_the_last_yield_in_every_mode():
    llm = ScriptedLLM(default="hello there")
    yields, folded, final = runs(BasicAgent(llm=llm, plugins=[Shout()]))
    assert all(y[-1]["content"] == "" for y in yields[:-1])  # an output check's text is held until it has passed
    assert yields[-1][-1]["content"] == "HELLO THERE"  # then goes out as the check left it
    assert folded == final == yields[-1]


def test_a_block_replaces_the_answer_and_says_by_whom():
    llm = ScriptedLLM(default="Paris is the capital.")
    yields, folded, final = runs(BasicAgent(llm=llm, plugins=[Refuse()]))
    assert not any("Paris" in y[-1]["content"] for y in yields)  # never shown
    last = yields[-1]
    assert len(last) == 1 and last[0]["content"] == "I cannot talk about that city."
    assert last[0]["extra"] == {"blocked_by": "no-paris", "blocked_reason": "mentions Paris"}
    assert folded == final == last


def test_a_block_before_the_run_calls_no_model():
    class Gate(Plugin):
        def before_run(self, agent, messages):
            raise Blocked("Not today.")

    llm = ScriptedLLM([])
    out = BasicAgent(llm=llm, plugins=[Gate()], name="bot").run_nonstream(USER)
    assert out == [{"role": "assistant", "content": "Not today.", "name": "bot", "extra": {"blocked_by": "Gate"}}]
    assert llm.calls == []


def test_order_before_hooks_in_order_after_hooks_reversed_and_model_and_tool_hooks():
    seen: list[str] = []

    @tool
    def weather(city: str) -> str:
        """Weather."""
        seen.append("tool ran")
        return f"sunny in {city}"

    class Trace(Plugin):
        def __init__(self, tag):
            super().__init__(name=tag)
            self.tag = tag

        def before_run(self, agent, messages):
            seen.append(f"{self.tag}.before_run")

        def before_model(self, agent, call):
            seen.append(f"{self.tag}.before_model")

        def after_model(self, agent, call, reply):
            seen.append(f"{self.tag}.after_model:{len(reply)}")

        def before_tool(self, agent, call):
            seen.append(f"{self.tag}.before_tool:{call.tool.name}:{call.args}")

        def after_tool(self, agent, outcome):
            seen.append(f"{self.tag}.after_tool")
            return outcome.content + f" ({self.tag})"

        def after_run(self, agent, response):
            seen.append(f"{self.tag}.after_run")

    llm = ScriptedLLM([tool_call("weather", {"city": "Oslo"}), "Sunny."])
    bot = FnCallAgent(llm=llm, function_list=[weather], plugins=[Trace("a"), Trace("b")])
    response = bot.run_nonstream(USER)
    assert seen == [
        "a.before_run", "b.before_run",
        "a.before_model", "b.before_model", "b.after_model:1", "a.after_model:1",
        "a.before_tool:weather:{'city': 'Oslo'}", "b.before_tool:weather:{'city': 'Oslo'}", "tool ran",
        "b.after_tool", "a.after_tool",
        "a.before_model", "b.before_model", "b.after_model:1", "a.after_model:1",
        "b.after_run", "a.after_run",
    ]  # fmt: skip
    assert response[1]["content"] == "sunny in Oslo (b) (a)"
    assert llm.calls[1].messages[-1].content == untrusted("sunny in Oslo (b) (a)", "tool weather")


def test_before_tool_may_answer_for_the_tool_and_before_model_may_change_the_request():
    ran = []

    @tool
    def delete_all() -> str:
        """Delete everything."""
        ran.append(1)
        return "deleted"

    class Guard(Plugin):
        def before_tool(self, agent, call):
            if call.tool.name == "delete_all":
                return "Refused by policy: this tool is disabled."

        def before_model(self, agent, call):
            call.cfg = {**call.cfg, "temperature": 0}

    llm = ScriptedLLM([tool_call("delete_all"), "I could not delete anything."])
    FnCallAgent(llm=llm, function_list=[delete_all], plugins=[Guard()]).run_nonstream(USER)
    assert ran == []
    assert llm.calls[1].messages[-1].content == untrusted(
        "Refused by policy: this tool is disabled.", "tool delete_all"
    )
    assert all(c.generate_cfg.get("temperature") == 0 for c in llm.calls)


def test_a_failing_plugin_fails_the_run_with_its_name_unless_it_says_to_ignore(caplog):
    class Broken(Plugin):
        def after_run(self, agent, response):
            raise KeyError("oops")

    llm = ScriptedLLM(default="fine")
    with pytest.raises(PluginError, match=r"plugin 'Broken' failed in after_run: KeyError: 'oops'") as e:
        BasicAgent(llm=llm, plugins=[Broken()]).run_nonstream(USER)
    assert isinstance(e.value.__cause__, KeyError) and e.value.hook == "after_run"
    with caplog.at_level(logging.WARNING, logger="chatagent.plugins"):
        out = BasicAgent(llm=llm, plugins=[Broken(on_error="ignore")]).run_nonstream(USER)
    assert out[-1]["content"] == "fine" and "Broken failed in after_run (ignored)" in caplog.text


def test_bad_plugins_and_bad_returns_are_clear_errors():
    with pytest.raises(TypeError, match="a plugin is an object with hooks"):
        BasicAgent(llm=ScriptedLLM([]), plugins=["redact"])

    class Shrink(Plugin):
        def after_run(self, agent, response):
            return []

    llm = ScriptedLLM(default="two words")
    with pytest.raises(PluginError, match="a streamed response cannot lose messages"):
        BasicAgent(llm=llm, plugins=[Shrink()]).run_nonstream(USER)

    class Wrong(Plugin):
        def before_run(self, agent, messages):
            return "hello"

    with pytest.raises(PluginError, match="it returned str, not a list of messages"):
        BasicAgent(llm=llm, plugins=[Wrong()]).run_nonstream(USER)


def test_retry_replaces_the_rejected_answer():
    class NoDigits(Plugin):
        def after_run(self, agent, response):
            if any(c.isdigit() for c in response[-1].text):
                raise Retry("Write numbers in words.")

    llm = ScriptedLLM(["There are 3 cats.", "There are three cats."])
    yields = list(BasicAgent(llm=llm, plugins=[NoDigits()]).run(USER))
    assert yields[-1] == [{"role": "assistant", "content": "There are three cats."}]
    assert "There are 3 cats." not in [y[-1]["content"] for y in yields]  # the rejected answer was never shown
    sent = llm.calls[1].messages
    assert [m.text for m in sent[-2:]] == ["There are 3 cats.", "Write numbers in words."]


def test_per_run_plugins_add_to_the_agents():
    llm = ScriptedLLM(default="Paris!")
    bot = BasicAgent(llm=llm, plugins=[Shout()])
    assert bot.run_nonstream(USER)[-1]["content"] == "PARIS!"
    assert bot.run_nonstream(USER, plugins=[Refuse()])[-1]["extra"]["blocked_by"] == "no-paris"
    assert bot.plugins[0].__class__ is Shout and len(bot.plugins) == 1


class WaitForModel(Plugin):
    """An input check that can only pass once the model has been called: it proves the two run side by side."""

    def __init__(self, llm, verdict=None):
        super().__init__()
        self.llm, self.verdict = llm, verdict

    def check_input(self, agent, messages):
        end = time.monotonic() + 30
        while not self.llm.calls:
            if time.monotonic() > end:
                raise AssertionError("the model was not called while the input check ran")
            time.sleep(0.001)
        if self.verdict:
            raise Blocked(self.verdict, reason="judge said no")


def test_input_check_runs_beside_the_model_and_nothing_shows_before_it_passes():
    llm = ScriptedLLM(default="An answer in several chunks.")
    check = WaitForModel(llm)
    yields = list(BasicAgent(llm=llm, plugins=[check]).run(USER))
    assert yields[-1][-1]["content"] == "An answer in several chunks."

    llm.calls.clear()
    check.verdict = "I can't help with that."
    yields = list(BasicAgent(llm=llm, plugins=[check]).run(USER))
    assert yields == [[{"role": "assistant", "content": "I can't help with that.", "extra": {
        "blocked_by": "WaitForModel", "blocked_reason": "judge said no"}}]]  # fmt: skip


def test_a_tripped_input_check_keeps_tools_from_running():
    ran = []

    @tool
    def send_mail(to: str) -> str:
        """Send a mail."""
        ran.append(to)
        return "sent"

    llm = ScriptedLLM([tool_call("send_mail", {"to": "boss"}), "Done."])
    bot = FnCallAgent(llm=llm, function_list=[send_mail], plugins=[WaitForModel(llm, "Blocked.")])
    yields = list(bot.run(USER))
    assert ran == [] and len(llm.calls) == 1
    assert yields[-1] == [{"role": "assistant", "content": "Blocked.",
                           "extra": {"blocked_by": "WaitForModel", "blocked_reason": "judge said no"}}]  # fmt: skip
    assert all("function_call" not in m for y in yields for m in y)


def test_arun_gives_what_run_gives():
    async def collect(bot, **kw):
        return [y async for y in bot.arun(USER, **kw)]

    for plugins in ([Shout()], [Refuse()], [WaitForModel(ScriptedLLM([]))]):
        llm = ScriptedLLM(default="Paris is nice.")
        for p in plugins:
            if isinstance(p, WaitForModel):
                p.llm = llm
        bot = BasicAgent(llm=llm, plugins=plugins)
        assert asyncio.run(collect(bot))[-1] == list(bot.run(USER))[-1]
        assert asyncio.run(bot.arun_nonstream(USER)) == bot.run_nonstream(USER)


def test_a_group_chat_members_plugins_apply_to_its_turns():
    alice = BasicAgent(llm=ScriptedLLM(default="Paris, of course."), name="alice", plugins=[Refuse()])
    bob = BasicAgent(llm=ScriptedLLM(default="Rome."), name="bob")
    chat = GroupChat(agents=[alice, bob], selection="round_robin", max_rounds=2)
    response = chat.run_nonstream(USER)
    assert [(m["name"], m["content"]) for m in response] == [
        ("alice", "I cannot talk about that city."),
        ("bob", "Rome."),
    ]
    assert response[0]["extra"]["blocked_by"] == "no-paris"
    assert "Paris" not in chat.agents[1].llm.calls[0].messages[-1].text  # bob never saw the blocked answer


def test_threads_share_an_agent_with_plugins():
    llm = ScriptedLLM(default="hello")
    bot = BasicAgent(llm=llm, plugins=[Shout(), Redact()])
    results: list = []

    def one() -> None:
        results.append(bot.run_nonstream(USER)[-1]["content"])

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == ["HELLO"] * 8


def test_no_plugins_no_plugin_machinery():
    code = (
        "import sys\n"
        "from chatagent import BasicAgent, ScriptedLLM\n"
        "BasicAgent(llm=ScriptedLLM(['hi'])).run_nonstream([{'role': 'user', 'content': 'x'}])\n"
        "print('chatagent.run.control' in sys.modules, 'chatagent.plugins.structured' in sys.modules)\n"
    )
    out = processes.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
