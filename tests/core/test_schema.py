"""Messages: construction, validation errors naming the field, dict access, OpenAI conversion."""

import pytest

from chatagent.schema import (
    ContentItem,
    FunctionCall,
    Message,
    MessageError,
    content_text,
    to_message,
    to_messages,
    to_openai,
)


def test_dict_like_access_and_dump_without_nones():
    m = Message("user", "hi", name="ann")
    assert m["role"] == "user" and m.get("name") == "ann" and m.get("reasoning_content", "x") == "x"
    m["content"] = "hello"
    assert m.model_dump() == {"role": "user", "content": "hello", "name": "ann"}
    assert "name" in m and "function_call" not in m
    with pytest.raises(KeyError):
        m["nope"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"role": "robot", "content": "x"}, "messages[0].role must be one of"),
        ({"content": "x"}, "messages[0].role is missing"),
        ({"role": "user", "content": 3}, "messages[0].content must be a string or a list"),
        ({"role": "user", "content": [{"text": "a", "image": "b"}]}, "messages[0].content[0]: exactly one of"),
        ({"role": "user", "content": [{"txt": "a"}]}, "messages[0].content[0]: unknown key 'txt'"),
        ({"role": "assistant", "function_call": {"arguments": "{}"}}, "messages[0].function_call.name is missing"),
        ({"role": "user", "content": "x", "name": 5}, "messages[0].name must be a string"),
    ],
)
def test_validation_errors_name_the_field(data, expected):
    with pytest.raises(MessageError) as e:
        to_messages([data])
    assert expected in str(e.value)


def test_content_items_exactly_one_kind():
    assert ContentItem(image="a.png").kind == "image"
    with pytest.raises(MessageError):
        ContentItem()
    with pytest.raises(MessageError):
        ContentItem(text=1)  # type: ignore[arg-type]


def test_round_trip_dict_message_dict():
    d = {
        "role": "assistant",
        "content": [{"text": "see"}, {"image": "http://x/y.png"}],
        "name": "bot",
        "reasoning_content": "hmm",
        "extra": {"k": 1},
    }
    m = to_message(d)
    assert m.model_dump() == d
    assert to_message(m.model_dump()) == m
    assert content_text(m.content) == "see"


def test_to_messages_copies_and_never_mutates():
    orig = {"role": "user", "content": [{"text": "a"}], "extra": {"x": 1}}
    msgs = to_messages([orig])
    msgs[0].extra["x"] = 2
    msgs[0].content.append(ContentItem(text="b"))
    assert orig == {"role": "user", "content": [{"text": "a"}], "extra": {"x": 1}}
    m = Message("user", [ContentItem(text="a")])
    copy = to_messages([m])[0]
    copy.content.append(ContentItem(text="b"))
    assert len(m.content) == 1


def test_openai_in_tool_calls_and_tool_role():
    msgs = to_messages(
        [
            {"role": "developer", "content": "sys"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "w?"}, {"type": "image_url", "image_url": {"url": "u"}}],
            },
            {
                "role": "assistant",
                "content": "checking",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "w", "arguments": '{"city": "Rome"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "cold"},
            {"role": "tool", "tool_call_id": "c2", "content": "warm"},
        ]
    )
    assert [m.role for m in msgs] == ["system", "user", "assistant", "assistant", "assistant", "function", "function"]
    assert msgs[1].content[1].image == "u"
    assert msgs[3].function_call == FunctionCall("w", '{"city": "Oslo"}') and msgs[3].extra["function_id"] == "c1"
    assert msgs[6].extra == {"function_id": "c2"}


def test_openai_out_merges_calls_and_pairs_results():
    msgs = [
        Message("user", [ContentItem(text="w?"), ContentItem(image="/tmp/a.png"), ContentItem(file="r.pdf")]),
        Message("assistant", "checking"),
        Message("assistant", "", function_call=FunctionCall("w", "{}"), extra={"function_id": "c1"}),
        Message("assistant", "", function_call=FunctionCall("v", "{}")),
        Message("function", "cold", name="w", extra={"function_id": "c1"}),
        Message("function", "ok", name="v"),
        Message("assistant", "done"),
    ]
    out = to_openai(msgs, image_url=lambda s: "data:" + s)
    assert out[0]["content"] == [
        {"type": "text", "text": "w?"},
        {"type": "image_url", "image_url": {"url": "data:/tmp/a.png"}},
        {"type": "text", "text": "[file: r.pdf]"},
    ]
    assert out[1]["content"] == "checking"
    assert [c["function"]["name"] for c in out[1]["tool_calls"]] == ["w", "v"]
    second_id = out[1]["tool_calls"][1]["id"]
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "cold"}
    assert out[3] == {"role": "tool", "tool_call_id": second_id, "content": "ok"}
    assert out[4] == {"role": "assistant", "content": "done"}
    # and back again: the same conversation
    back = to_messages(out)
    assert [m.function_call.name for m in back if m.function_call] == ["w", "v"]


def test_messages_must_be_a_list():
    with pytest.raises(MessageError):
        to_messages({"role": "user", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(MessageError):
        to_messages(["hello"])  # type: ignore[list-item]
