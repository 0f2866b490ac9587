"""Fragments add up to messages; merge_delta rebuilds what cumulative mode yields."""

import pytest

from chatagent.schema import FunctionCall, Message, to_messages
from chatagent.schema.fragment import Fragment, as_fragment, fragment, is_fragment, typed
from chatagent.schema.stream import Collector, DictResponse, Response, accumulate, collect, merge_delta


def frag(index, content="", **kw):
    return Fragment("assistant", content, kw.get("reasoning"), kw.get("name"), kw.get("fc"), index=index)


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


def test_a_message_without_extra_is_refused_as_a_fragment_by_name():
    plain = Message("assistant", "hi")
    for add in (Response().add, DictResponse().add, Collector().add, lambda fs: merge_delta([], fs)):
        with pytest.raises(ValueError, match="not a fragment"):
            add([plain])


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
    assert f.index == 3 and f.extra == {"function_id": "c"} and m.extra == {"function_id": "c"}
    f.extra["x"] = 1
    assert m.extra == {"function_id": "c"}  # a copy


def _bytes_allocated_folding(n: int, as_dicts: bool) -> int:
    """Memory allocated while folding n one-character fragments (summed per call: what each call had to
    allocate on top of what it kept). A fold that rebuilds the whole text per fragment allocates the text
    each time (quadratic in n); one that grows it in place allocates about one character per fragment."""
    import tracemalloc

    frags = [[frag(0, "x", reasoning="y")] for _ in range(n)]
    if as_dicts:
        frags = [[f.model_dump() for f in fs] for fs in frags]
    full: list = []
    total = 0
    tracemalloc.start()
    try:
        for fs in frags:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            merge_delta(full, fs)
            total += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    got = full[0]["content"] if as_dicts else full[0].content
    assert got == "x" * n
    return total


@pytest.mark.parametrize("as_dicts", [False, True], ids=["messages", "dicts"])
def test_merge_delta_does_work_linear_in_the_answer(as_dicts):
    small, large = (_bytes_allocated_folding(n, as_dicts) for n in (4_000, 16_000))
    # 4x the fragments: about 4x the work when linear, 16x when every fragment copies the whole text
    assert large / small < 6, (small, large)
    assert large / 16_000 < 4_000  # bytes per fragment stay bounded (the old fold: ~16 kB per fragment here)


def test_merge_delta_updates_in_place_and_leaves_fragments_alone():
    first = frag(0, "He", reasoning="r1")
    full: list = []
    merge_delta(full, [first])
    merge_delta(full, [frag(0, "llo", reasoning="r2", name="bot"), frag(1, fc=FunctionCall("f", "{}"))])
    assert first.content == "He" and first.reasoning_content == "r1"  # the caller's fragment is unchanged
    assert full[0].content == "Hello" and full[0].reasoning_content == "r1r2" and full[0].name == "bot"
    assert full[1].function_call.name == "f"
    dicts: list = []
    merge_delta(dicts, [{"role": "assistant", "content": "He", "extra": {"index": 0}}])
    merge_delta(dicts, [{"role": "assistant", "content": "llo", "extra": {"index": 0, "function_id": "c1"}}])
    assert dicts == [{"role": "assistant", "content": "Hello", "extra": {"function_id": "c1"}}]
    with pytest.raises(ValueError):
        merge_delta(dicts, [{"role": "assistant", "content": "x", "extra": {"index": 5}}])


def test_a_fragment_is_a_message_with_its_place_as_a_field():
    f = Fragment("assistant", "hi", extra={"function_id": "c"}, index=2)
    assert isinstance(f, Message) and f.index == 2 and not f.replace
    assert f["content"] == "hi" and f["index"] == 2 and f.extra == {"function_id": "c"}
    assert f.model_dump() == {"role": "assistant", "content": "hi", "extra": {"function_id": "c"}, "index": 2}
    assert Fragment("assistant", "x", index=0, replace=True).model_dump()["replace"] is True
    assert f.copy().index == 2 and f.copy() == f and f.copy() is not f
    assert type(to_messages([f])[0]) is Message  # as a conversation's message it is a plain one
    for bad in (-1, "0", 1.0, True):
        with pytest.raises(ValueError, match="index must be an int >= 0"):
            Fragment("assistant", "x", index=bad)


def test_messages_marked_the_older_way_still_fold_like_fragments():
    old = [
        [Message("assistant", "He", extra={"index": 0})],
        [Message("assistant", "llo", extra={"index": 0, "stop_reason": "length"})],
        [Message("assistant", "call", extra={"index": 1, "function_id": "c"})],
        [Message("assistant", "Bye", extra={"index": 0, "replace": True})],
    ]
    new = [
        [frag(0, "He")],
        [Fragment("assistant", "llo", extra={"stop_reason": "length"}, index=0)],
        [Fragment("assistant", "call", extra={"function_id": "c"}, index=1)],
        [Fragment("assistant", "Bye", index=0, replace=True)],
    ]
    expected = [Message("assistant", "Bye"), Message("assistant", "call", extra={"function_id": "c"})]
    for stream in (old, new):
        assert list(accumulate(iter(stream)))[-1] == expected
        assert collect(iter(stream)) == expected
        dicts = DictResponse()
        for fs in stream:
            dicts.add(fs)
        assert dicts.messages == [m.model_dump() for m in expected]
        for as_dicts in (False, True):
            full: list = []
            for fs in stream:
                merge_delta(full, [f.model_dump() for f in fs] if as_dicts else fs)
            assert full == ([m.model_dump() for m in expected] if as_dicts else expected)
    assert [as_fragment(f).model_dump() for fs in old for f in fs] == [f.model_dump() for fs in new for f in fs]
    assert old[1][0].extra == {"index": 0, "stop_reason": "length"}  # converting leaves the caller's message alone


def test_typed_passes_fragment_lists_through_and_converts_others():
    fs = [frag(0, "a"), frag(1, "b")]
    assert typed(fs) is fs
    mixed = [frag(0, "a"), Message("assistant", "b", extra={"index": 1})]
    out = typed(mixed)
    assert out is not mixed and [type(f) for f in out] == [Fragment, Fragment] and out[1].index == 1
    with pytest.raises(ValueError, match="not a fragment"):
        typed([Message("assistant", "b")])
    assert is_fragment(mixed[0]) and is_fragment(mixed[1])
    assert not is_fragment(Message("assistant", "b")) and not is_fragment({"role": "assistant", "index": 0})


def test_collector_dumps_are_the_model_dumps_of_its_messages() -> None:
    from chatagent.schema import ContentItem

    c = Collector()
    c.add([fragment(Message("assistant", "Let me ", reasoning_content="think"), 0)])
    c.add([fragment(Message("assistant", "look.", reasoning_content=" more"), 0)])
    call = Message("assistant", "", function_call=FunctionCall(name="f", arguments="{}"), extra={"function_id": "c1"})
    c.add([fragment(call, 1), fragment(Message("function", "done", name="f", extra={"function_id": "c1"}), 2)])
    c.add([fragment(Message("function", [ContentItem(text="a"), ContentItem(image="https://x/i.png")], name="g"), 3)])
    c.add([fragment(Message("assistant", "", name="bot"), 4)])
    for start in range(6):
        assert c.dumps(start) == [m.model_dump() for m in c.messages(start)]
    assert c.dumps(3)[0]["content"] == [{"text": "a"}, {"image": "https://x/i.png"}]
