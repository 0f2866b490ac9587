"""The web UI's form for a tool's questions, without a browser: which field each JSON Schema gets, the answers read
from the fields (empty ones left out, choices and integers as the schema has them, JSON parsed), and how the
question and its answer show in the chat (escaped)."""

from __future__ import annotations

from chatagent import Message
from chatagent.gui.questions import KINDS, answers_from, field_kind
from chatagent.gui.render import render_message
from chatagent.run.interrupts import answer_message


def test_each_schema_gets_its_field() -> None:
    assert field_kind(None) == "text" and field_kind({"type": "string", "format": "date"}) == "text"
    assert field_kind({"type": "integer"}) == "number" and field_kind({"type": "number"}) == "number"
    assert field_kind({"type": "boolean"}) == "check"
    assert field_kind({"enum": ["a", 2]}) == "choice" and field_kind({"type": "string", "enum": ["x"]}) == "choice"
    assert field_kind({"type": "object"}) == "json" and field_kind({"type": "array"}) == "json"


def _values(*slots: dict[str, object]) -> list[object]:
    out: list[object] = []
    for slot in slots:
        out += [slot.get(kind, {"check": False}.get(kind)) for kind in KINDS]
    return out


def test_the_answers_are_read_as_their_schemas_have_them() -> None:
    questions = [
        {"id": "c1#0", "question": "Nights?", "schema": {"type": "integer"}},
        {"id": "c2#0", "question": "Floor?", "schema": {"enum": [1, 2]}},
        {"id": "c3#0", "question": "Seat?", "schema": {"type": "object"}},
        {"id": "c4#0", "question": "Note?", "schema": None},
    ]
    values = _values({"number": 3.0}, {"choice": "2"}, {"json": '{"side": "aisle"}'}, {"text": "  "})
    assert answers_from(questions, values) == {"c1#0": 3, "c2#0": 2, "c3#0": {"side": "aisle"}}  # the note waits
    assert answers_from(questions[2:3], _values({"json": "not json"})) == {"c3#0": "not json"}  # the check says no


def test_a_question_and_its_answer_show_in_the_chat_escaped() -> None:
    marker = Message("assistant", "", extra={"pending_questions": [
        {"id": "c1#0", "question": "Which <b>date</b>?", "schema": None, "call_id": "c1"}]})  # fmt: skip
    (shown,) = render_message(marker)
    assert "The agent asks: Which &lt;b>date&lt;/b>?" in shown["content"]["text"]
    (said,) = render_message(Message("user", "", extra=answer_message({"c1#0": "May <3>"})["extra"]))
    assert said["role"] == "user" and "Answered: May &lt;3>" in said["content"]["text"]
