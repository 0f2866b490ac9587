"""GroupChat and UserAgent: seats, selection modes, @mentions, termination, the human pause and resume."""

from __future__ import annotations

import copy
import logging
import sys
import time

import pytest

from chatagent import BasicAgent, Message, Reply, ScriptedLLM, merge_delta
from chatagent.agents.group_chat import GroupChat, agents_from_config, find_mention, parse_host_answer
from chatagent.agents.user import PENDING_USER_INPUT, UserAgent, is_pending_input, pending_input
from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.prepare import untrusted

ASK = [{"role": "user", "content": "Tabs or spaces?"}]


def bot(name: str, *replies, description: str | None = None, **kw) -> BasicAgent:
    return BasicAgent(llm=ScriptedLLM(list(replies), **kw), name=name, description=description or f"{name} bot")


def texts(response: list) -> list[tuple[str, str]]:
    return [(m["name"], m["content"]) for m in response]


def assert_stream_contract(make_chat, messages=ASK, **run_kw) -> list:
    """Each cumulative yield extends the previous; the last equals run_nonstream; deltas add up to it."""
    yields = [copy.deepcopy(r) for r in make_chat().run(messages, **run_kw)]
    assert yields
    for prev, cur in zip(yields, yields[1:], strict=False):
        assert len(cur) >= len(prev)
        for p, c in zip(prev, cur, strict=False):
            assert c["content"].startswith(p["content"])
            assert c["name"] == p["name"]
    final = make_chat().run_nonstream(messages, **run_kw)
    assert yields[-1] == final
    full: list = []
    for d in make_chat().run(messages, delta_stream=True, **run_kw):
        merge_delta(full, d)
    assert full == final
    return final


# ---- round robin and seats ------------------------------------------------------------------------------


def test_round_robin_turns_and_every_message_carries_its_speaker():
    alice, bob = bot("Alice", "Tabs.", "Still tabs."), bot("Bob", "Spaces.", "Spaces forever.")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=4)
    out = chat.run_nonstream(ASK)
    assert texts(out) == [("Alice", "Tabs."), ("Bob", "Spaces."), ("Alice", "Still tabs."), ("Bob", "Spaces forever.")]
    alice.llm.assert_complete(), bob.llm.assert_complete()


def test_each_speaker_sees_the_chat_from_its_own_seat():
    alice, bob = bot("Alice", "Tabs.", "Still tabs."), bot("Bob", "Spaces.")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=3, background="A style debate.")
    chat.run_nonstream([{"role": "system", "content": "Be polite."}, *ASK])
    seen = alice.llm.calls[1].messages  # Alice's second turn
    assert seen[0].role == "system"
    assert "You are Alice" in seen[0].content and "A style debate." in seen[0].content
    assert "- Bob: Bob bot" in seen[0].content and seen[0].content.endswith("Be polite.")
    assert [(m.role, m.name, m.content) for m in seen[1:]] == [
        ("user", None, "Tabs or spaces?"),
        ("assistant", "Alice", "Tabs."),
        ("user", "Bob", "Bob: Spaces."),
    ]
    assert "You are Bob" in bob.llm.calls[0].messages[0].content
    assert bob.llm.calls[0].messages[-1].content == "Alice: Tabs."


def test_other_speakers_tool_calls_are_hidden_but_own_are_kept():
    history = [
        *ASK,
        Message("assistant", "", name="Alice", function_call={"name": "search", "arguments": "{}"}),
        Message("function", "found: tabs", name="search"),
        Message("assistant", "Tabs, says the web.", name="Alice"),
    ]
    alice, bob = bot("Alice", "Agreed."), bot("Bob", "No.")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=2)
    out = chat.run_nonstream([m if isinstance(m, dict) else m.model_dump() for m in history])
    assert texts(out) == [("Bob", "No."), ("Alice", "Agreed.")]
    bob_view = bob.llm.calls[0].messages[1:]
    assert [(m.role, m.content) for m in bob_view] == [
        ("user", "Tabs or spaces?"),
        ("user", "Alice: Tabs, says the web."),
    ]
    alice_view = alice.llm.calls[0].messages[1:]
    assert [m.role for m in alice_view] == ["user", "assistant", "function", "assistant", "user"]
    assert alice_view[1].function_call.name == "search"


def test_multimodal_message_from_someone_else_gets_a_text_prefix():
    alice, bob = bot("Alice", "A cat."), bot("Bob", "unused")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=1)
    chat.run_nonstream([{"role": "user", "name": "Carol", "content": [{"text": "what is it?"}, {"image": "c.png"}]}])
    seen = alice.llm.calls[0].messages[-1]
    assert seen.content[0].text == "Carol: " and seen.content[1].text == "what is it?"


def test_round_robin_continues_after_the_last_speaker_in_the_history():
    history = [*ASK, {"role": "assistant", "name": "Alice", "content": "Tabs."}]
    alice, bob = bot("Alice", "x"), bot("Bob", "Spaces.")
    out = GroupChat([alice, bob], selection="round_robin", max_rounds=1).run_nonstream(history)
    assert texts(out) == [("Bob", "Spaces.")]


# ---- other selection modes ------------------------------------------------------------------------------


def test_random_selection_never_repeats_the_last_speaker_and_is_repeatable_with_a_seed():
    def run(seed):
        agents = [BasicAgent(llm=ScriptedLLM([], default=n.lower()), name=n) for n in ("A", "B", "C")]
        return [m["name"] for m in GroupChat(agents, selection="random", max_rounds=12, seed=seed).run_nonstream(ASK)]

    order = run(7)
    assert len(order) == 12 and set(order) == {"A", "B", "C"}
    assert all(a != b for a, b in zip(order, order[1:], strict=False))
    assert run(7) == order


def test_auto_selection_asks_the_host_with_names_and_descriptions():
    alice = bot("Alice", "Tabs.", description="likes tabs")
    bob = bot("Bob", "Spaces.", description="likes spaces")
    host = ScriptedLLM(["Bob", "  **alice**. ", "[STOP]"])
    chat = GroupChat([alice, bob], llm=host, background="Code style.")
    out = chat.run_nonstream(ASK)
    assert texts(out) == [("Bob", "Spaces."), ("Alice", "Tabs.")]
    prompt = host.calls[0].messages[-1].content
    assert "- Alice: likes tabs" in prompt and "- Bob: likes spaces" in prompt and "Code style." in prompt
    assert "user: Tabs or spaces?" in prompt
    assert "Bob: Spaces." in host.calls[1].messages[-1].content
    host.assert_complete()


def test_auto_selection_falls_back_to_round_robin_on_an_invalid_answer(caplog):
    alice, bob = bot("Alice", "Tabs."), bot("Bob", "Spaces.")
    host = ScriptedLLM(["Carol should speak", "[STOP]"])
    with caplog.at_level(logging.WARNING, logger="chatagent.group_chat"):
        out = GroupChat([alice, bob], llm=host).run_nonstream(ASK)
    assert texts(out) == [("Alice", "Tabs.")]
    assert "naming no participant" in caplog.text and "Carol should speak" in caplog.text


def test_a_long_host_answer_is_quoted_by_a_short_prefix_in_the_log(caplog):
    rambling = "I think that the next speaker should be someone thoughtful. " * 70
    host = ScriptedLLM([rambling, "[STOP]"])
    with caplog.at_level(logging.WARNING, logger="chatagent.group_chat"):
        GroupChat([bot("Alice", "Tabs."), bot("Bob", "Spaces.")], llm=host).run_nonstream(ASK)
    (record,) = [r for r in caplog.records if "naming no participant" in r.getMessage()]
    line = record.getMessage()
    assert "I think that the next speaker" in line and f"({len(rambling)} chars)" in line
    assert len(line) < 250 and line.count("someone thoughtful") <= 1


def test_auto_selection_uses_chinese_prompts_for_chinese_input():
    alice = bot("小明", "用制表符。")
    host = ScriptedLLM(["下一位：小明", "[STOP]"])
    out = GroupChat([alice, bot("小红", "x")], llm=host).run_nonstream([{"role": "user", "content": "缩进用什么？"}])
    assert texts(out) == [("小明", "用制表符。")]
    assert "下一位应该由谁发言" in host.calls[0].messages[-1].content
    assert "你是小明" in alice.llm.calls[0].messages[0].content


def test_mention_makes_that_agent_speak_next_in_every_mode():
    alice = bot("Alice", "I say tabs. @Bob, your view?")
    bob = bot("Bob", "Spaces. What about you, @carol?")
    carol = bot("Carol", "Both.")
    host = ScriptedLLM(["Alice", "[STOP]"])  # the host is asked only when nobody was mentioned
    out = GroupChat([alice, bob, carol], llm=host, max_rounds=5).run_nonstream(ASK)
    assert [m["name"] for m in out] == ["Alice", "Bob", "Carol"]
    assert len(host.calls) == 2


def test_mention_in_the_users_message_picks_the_first_speaker():
    alice, bob = bot("Alice", "x"), bot("Bob", "Spaces.")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=1)
    assert texts(chat.run_nonstream([{"role": "user", "content": "@Bob what do you use?"}])) == [("Bob", "Spaces.")]


def test_manual_selection_runs_the_named_speaker_and_follows_mentions_only():
    alice, bob = bot("Alice", "Tabs. @Bob?"), bot("Bob", "Spaces.")
    chat = GroupChat([alice, bob], selection="manual", max_rounds=5)
    assert texts(chat.run_nonstream(ASK, speaker="Alice")) == [("Alice", "Tabs. @Bob?"), ("Bob", "Spaces.")]
    with pytest.raises(ValueError, match="speaker=name"):
        chat.run_nonstream(ASK)
    with pytest.raises(ValueError, match="not in this group chat"):
        chat.run_nonstream(ASK, speaker="Zed")


def test_find_mention_and_parse_host_answer():
    names = ["Bob", "Bobby", "Ann Lee", "小红"]
    assert find_mention("hi @bobby and @Bob", names) == "Bobby"
    assert find_mention("mail bob@example.com", names) is None
    assert find_mention("@Bobcat", names) is None
    assert find_mention("ask @Ann Lee", names) == "Ann Lee"
    assert find_mention("请@小红回答", names) == "小红"
    assert parse_host_answer("Bob", names) == "Bob"
    assert parse_host_answer('"bobby".', names) == "Bobby"
    assert parse_host_answer("Next speaker: **Ann Lee**", names) == "Ann Lee"
    assert parse_host_answer("Bobby Tables", names) == "Bobby"
    assert parse_host_answer("Bob or Ann Lee", names) is None
    assert parse_host_answer("nobody", names) is None
    assert parse_host_answer("STOP.", names) == "[STOP]"
    assert parse_host_answer("I think we are done: [STOP]", names) == "[STOP]"


# ---- termination ----------------------------------------------------------------------------------------


def test_max_rounds_counts_turns_per_run():
    alice, bob = bot("Alice", default="more"), bot("Bob", default="more")
    out = GroupChat([alice, bob], selection="round_robin", max_rounds=3).run_nonstream(ASK)
    assert [m["name"] for m in out] == ["Alice", "Bob", "Alice"]


def test_termination_word_ends_the_chat_after_that_turn():
    alice, bob = bot("Alice", "Tabs."), bot("Bob", "Fine, tabs. TERMINATE")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=9, termination_words=["TERMINATE"])
    assert [m["name"] for m in chat.run_nonstream(ASK)] == ["Alice", "Bob"]


def test_termination_function_sees_the_whole_conversation():
    seen = []

    def done(conversation: list[Message]) -> bool:
        seen.append([m.role for m in conversation])
        return "agree" in conversation[-1].text

    alice, bob = bot("Alice", "Tabs."), bot("Bob", "I agree.")
    chat = GroupChat([alice, bob], selection="round_robin", max_rounds=9, is_termination=done)
    assert [m["name"] for m in chat.run_nonstream(ASK)] == ["Alice", "Bob"]
    assert seen == [["user", "assistant"], ["user", "assistant", "assistant"]]


def test_host_stop_before_anyone_speaks_gives_an_empty_response():
    chat = GroupChat([bot("Alice", "x")], llm=ScriptedLLM(["[STOP]"]))
    assert chat.run_nonstream(ASK) == []


# ---- the human in the loop ------------------------------------------------------------------------------


def test_human_turn_pauses_with_a_marker_and_resumes_with_their_message():
    alice = bot("Alice", "Tabs. What do you think, @Me?", "Glad you agree.")
    me = UserAgent(name="Me", description="the product owner")
    chat = GroupChat([alice, me], selection="round_robin", max_rounds=6)
    first = chat.run_nonstream(ASK)
    assert first[-1] == {
        "role": "assistant",
        "name": "Me",
        "content": PENDING_USER_INPUT,
        "extra": {"pending_user_input": "Me"},
    }
    assert pending_input(first) == "Me" and is_pending_input(first[-1])
    assert texts(first[:-1]) == [("Alice", "Tabs. What do you think, @Me?")]

    history = ASK + first + [{"role": "user", "name": "Me", "content": "Tabs it is."}]
    second = chat.run_nonstream(history)
    assert texts(second[:-1]) == [("Alice", "Glad you agree.")] and pending_input(second) == "Me"
    seen = alice.llm.calls[1].messages
    assert not any(PENDING_USER_INPUT in m.text for m in seen)
    assert seen[-1].content == "Me: Tabs it is." and seen[-1].role == "user"


def test_an_unnamed_user_message_counts_as_the_first_humans():
    alice, bob = bot("Alice", "Hi Me."), bot("Bob", "Hi all.")
    me = UserAgent(name="Me")
    chat = GroupChat([me, alice, bob], selection="round_robin", max_rounds=5)
    out = chat.run_nonstream(ASK)
    assert [m["name"] for m in out] == ["Alice", "Bob", "Me"] and pending_input(out) == "Me"
    assert alice.llm.calls[0].messages[-1].content == "Me: Tabs or spaces?"


def test_host_can_hand_the_turn_to_the_human():
    alice = bot("Alice", "Tabs.")
    chat = GroupChat([alice, UserAgent("Dana", "a reviewer")], llm=ScriptedLLM(["Alice", "Dana"]))
    out = chat.run_nonstream(ASK)
    assert texts(out)[0] == ("Alice", "Tabs.") and pending_input(out) == "Dana"


def test_user_agent_alone_yields_the_marker_and_pending_input_is_none_otherwise():
    out = UserAgent("Zoe").run_nonstream(ASK)
    assert pending_input(out) == "Zoe"
    assert pending_input([]) is None and pending_input([{"role": "assistant", "content": "hi"}]) is None


def test_stream_contract_holds_across_turns_and_the_pause():
    def make():
        alice = bot("Alice", Reply(text="Tabs are better, " * 8, reasoning="hmm"), chunk_size=3)
        bob = bot("Bob", "Spaces are better. " * 6, chunk_size=5)
        return GroupChat([alice, bob, UserAgent("Me")], selection="round_robin", max_rounds=5)

    final = assert_stream_contract(make)
    assert [m["name"] for m in final] == ["Alice", "Bob", "Me"]
    assert final[0]["reasoning_content"] == "hmm"


def test_run_usage_includes_the_participants_and_the_host():
    alice = bot("Alice", "Tabs or spaces, tabs.")
    run = GroupChat([alice], llm=ScriptedLLM(["Alice", "[STOP]"])).run(ASK)
    list(run)
    assert run.usage.calls == 3 and run.usage.completion_tokens > 0


def test_deadline_reaches_the_participants():
    def slow(messages, functions):
        time.sleep(0.3)
        return "late"

    chat = GroupChat([bot("A", slow, slow), bot("B", slow)], selection="round_robin", max_rounds=5)
    with pytest.raises(RunDeadlineExceeded):
        chat.run_nonstream(ASK, deadline=0.45)


def test_input_is_not_mutated():
    msgs = [*ASK, {"role": "assistant", "name": "Alice", "content": "Tabs.", "extra": {"k": [1]}}]
    snapshot = copy.deepcopy(msgs)
    GroupChat([bot("Alice", "x"), bot("Bob", "y")], selection="round_robin", max_rounds=2).run_nonstream(msgs)
    assert msgs == snapshot


# ---- construction ---------------------------------------------------------------------------------------


def test_config_form_builds_participants():
    llm = ScriptedLLM([], default="ok")
    config = {
        "background": "A design review.",
        "agents": [
            {"name": "Arch", "description": "architect", "instructions": "Be concise."},
            {"name": "Owner", "description": "product owner", "is_human": True},
        ],
    }
    chat = GroupChat(agents=config, selection="round_robin", llm=llm)
    arch, owner = chat.agents
    assert isinstance(arch, BasicAgent) and arch.system_message == "Be concise." and arch.llm is llm
    assert isinstance(owner, UserAgent) and owner.description == "product owner"
    assert chat.background == "A design review."
    out = chat.run_nonstream(ASK)
    assert texts(out)[0] == ("Arch", "ok") and pending_input(out) == "Owner"
    assert llm.calls[0].messages[0].content.startswith("Be concise.\n\nYou are Arch")


def test_config_with_knowledge_files_needs_the_assistant(monkeypatch):
    monkeypatch.setitem(sys.modules, "chatagent.agents.assistant", None)  # as if it could not be imported
    config = {"agents": [{"name": "Lib", "knowledge_files": ["spec.pdf"]}]}
    with pytest.raises(ValueError, match="knowledge_files.*Assistant"):
        agents_from_config(config, ScriptedLLM([]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"agents": []}, "at least one"),
        ({"agents": ["not an agent"]}, "must be Agents"),
        ({"agents": {"agents": []}}, "non-empty list"),
        ({"agents": {"agents": [{"description": "x"}]}}, "with a 'name'"),
        ({"selection": "loudest"}, "selection must be one of"),
        ({"max_rounds": 0}, "max_rounds"),
    ],
)
def test_bad_construction_is_a_clear_error(kwargs, message):
    kwargs = {"agents": [bot("A", "x"), bot("B", "y")], **kwargs}
    with pytest.raises((ValueError, TypeError), match=message):
        GroupChat(**kwargs)


def test_participants_need_unique_names():
    with pytest.raises(ValueError, match="two participants are called 'A'"):
        GroupChat([bot("A", "x"), bot("A", "y")])
    with pytest.raises(ValueError, match="needs a name"):
        GroupChat([BasicAgent(llm=ScriptedLLM([]))])


# ---- participants with tools, events --------------------------------------------------------------------


def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: what to look up.
    """
    return f"{term}: a whitespace character"


def test_a_tool_using_participant_keeps_its_calls_to_itself():
    from chatagent import tool_call
    from chatagent.agents.fncall import FnCallAgent

    alice = FnCallAgent(
        llm=ScriptedLLM([tool_call("lookup", {"term": "tab"}), "Tabs are whitespace.", "Still tabs."]),
        function_list=[lookup],
        name="Alice",
    )
    bob = bot("Bob", "Spaces are too.")
    out = GroupChat([alice, bob], selection="round_robin", max_rounds=3).run_nonstream(ASK)
    assert [(m["role"], m["name"]) for m in out] == [
        ("assistant", "Alice"),
        ("function", "lookup"),
        ("assistant", "Alice"),
        ("assistant", "Bob"),
        ("assistant", "Alice"),
    ]
    assert [m.content for m in bob.llm.calls[0].messages[1:]] == ["Tabs or spaces?", "Alice: Tabs are whitespace."]
    alice_view = alice.llm.calls[2].messages[1:]
    assert [m.role for m in alice_view] == ["user", "assistant", "function", "assistant", "user"]
    assert alice_view[2].content == untrusted("tab: a whitespace character", "tool lookup")


def test_config_with_tools_builds_a_tool_agent():
    from chatagent.agents.fncall import FnCallAgent

    chat = GroupChat({"agents": [{"name": "Finder", "tools": [lookup]}]}, llm=ScriptedLLM([]))
    assert isinstance(chat.agents[0], FnCallAgent) and list(chat.agents[0].function_map) == ["lookup"]


def test_callbacks_hear_the_host_and_the_participants():
    events = []
    alice = bot("Alice", "Tabs.")
    chat = GroupChat([alice], llm=ScriptedLLM(["Alice", "[STOP]"]))
    chat.run_nonstream(ASK, callbacks=[lambda e: events.append((e.kind, e.agent))])
    host_turn = [("run_start", "host"), ("llm_start", "host"), ("llm_end", "host"), ("run_end", "host")]
    assert events == [
        ("run_start", "GroupChat"),
        *host_turn,
        ("run_start", "Alice"),
        ("llm_start", "Alice"),
        ("llm_end", "Alice"),
        ("run_end", "Alice"),
        *host_turn,
        ("run_end", "GroupChat"),
    ]


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("Alice: Tabs, clearly.", "Tabs, clearly."),
        ("  **Alice:**   Tabs, clearly.", "Tabs, clearly."),
        ("**Alice**: Tabs.", "Tabs."),
        ("Alice：制表符。", "制表符。"),
        ("Alice's view: tabs.", "Alice's view: tabs."),
        ("Al", "Al"),
        ("Bob: is wrong.", "Bob: is wrong."),
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 2, 5])
def test_a_reply_starting_with_the_speakers_own_name_loses_it(reply, shown, chunk_size):
    def make():
        alice = bot("Alice", Reply(text=reply, reasoning="r" if chunk_size == 2 else ""), chunk_size=chunk_size)
        return GroupChat([alice, bot("Bob", "Spaces.")], selection="round_robin", max_rounds=2)

    final = assert_stream_contract(make)
    assert texts(final) == [("Alice", shown), ("Bob", "Spaces.")]
