"""Fragments add up to messages; merge_delta rebuilds what cumulative mode yields."""

import pytest

from chatagent.schema import FunctionCall, Message
from chatagent.stream import Response, accumulate, collect, fragment, merge_delta


def frag(index, content="", **kw):
    return Message._make("assistant", content, kw.get("name"), kw.get("fc"), kw.get("reasoning"), {"index": index})


def test_response_grows_and_copies_on_write():
    r = Response()
    r.add([frag(0, "He")])
    first = r.messages[0]
    r.add([frag(0, "llo", reasoning="r")])
    assert first.content == "He"  # earlier views unchanged
    assert r.messages[0].content == "Hello" and r.messages[0].reasoning_content == "r"
    r.add([frag(1, fc=FunctionCall("f", "{}"))])
    assert r.messages[1].function_call.name == "f" and r.messages[1].extra is None


def test_fragment_past_the_end_is_a_bug():
    with pytest.raises(ValueError):
        Response().add([frag(2, "x")])


def test_accumulate_collect_and_merge_delta_agree():
    stream = [[frag(0, "a")], [frag(0, "b")], [frag(1, "c", name="n")], [frag(1, "d")]]
    cumulative = list(accumulate(iter(stream)))
    assert [m.content for m in cumulative[-1]] == ["ab", "cd"]
    assert [len(x) for x in cumulative] == [1, 1, 2, 2]
    assert collect(iter(stream)) == cumulative[-1]
    full: list = []
    for f in stream:
        merge_delta(full, [x.model_dump() for x in f])
    assert full == [m.model_dump() for m in cumulative[-1]]


def test_fragment_helper_keeps_original():
    m = Message("assistant", "x", extra={"function_id": "c"})
    f = fragment(m, 3)
    assert f.extra == {"function_id": "c", "index": 3} and m.extra == {"function_id": "c"}
