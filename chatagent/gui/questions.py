"""A tool's questions in the web UI (`chatagent.ask_user`): `QuestionForm`, a form under the chat, shown while the
conversation's run waits for answers; its fields are built from each question's JSON Schema (a text box for a
string, a number box for a number or an integer, a checkbox for a boolean, a list of choices for an enum, a text box
taking JSON otherwise). Sending it checks the answers against the schemas (what does not fit is said in the form,
and nothing runs) and resumes the run with them (`chatagent.answer_message`). A question left empty waits: the run
pauses again on it once the others are answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from chatagent.gui.render import escape_markdown
from chatagent.run.interrupts import PENDING_QUESTIONS, answer_message, checked_answers
from chatagent.schema import to_message

if TYPE_CHECKING:
    from chatagent.gui.session import ChatSession

#: Runs a turn of a session with an agent (the page's own `WebUI._turn`): the page's updates as they come.
Turn = Callable[["ChatSession", Any], AsyncIterator[tuple]]
MAX_FIELDS = 4  # questions shown at once (more wait for the next form: they are answered one by one)
KINDS = ("text", "number", "check", "choice", "json")


def waiting_questions(session: ChatSession | None) -> list[dict[str, Any]]:
    """The questions the session's conversation waits for (none while a turn runs)."""
    if session is None or session.running or not session.history:
        return []
    return list((session.history[-1].extra or {}).get(PENDING_QUESTIONS) or ())


def field_kind(schema: Any) -> str:
    """Which field answers a question of JSON Schema `schema` (one of KINDS)."""
    if not isinstance(schema, dict):
        return "text"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, (str, int, float)) for v in enum):
        return "choice"
    kind = schema.get("type")
    if kind in (None, "string"):
        return "text"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "check"
    return "json"


def answers_from(questions: list[dict[str, Any]], values: Sequence[Any]) -> dict[str, Any]:
    """{question id: answer} from the form's fields (`values`: each slot's text, number, check, choice, json);
    a field left empty is no answer."""
    out: dict[str, Any] = {}
    for n, q in enumerate(questions[:MAX_FIELDS]):
        kind = field_kind(q.get("schema"))
        value = values[n * len(KINDS) + KINDS.index(kind)]
        if kind == "number" and value is not None and (q.get("schema") or {}).get("type") == "integer":
            value = int(value) if float(value).is_integer() else value
        if kind == "choice":
            enum = (q.get("schema") or {})["enum"]
            value = next((v for v in enum if str(v) == value), value)  # the choice as the schema has it
        if kind == "json" and isinstance(value, str) and value.strip():
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                pass  # the schema check says what does not fit
        if value is None or (isinstance(value, str) and not value.strip() and kind != "check"):
            continue
        out[q["id"]] = value
    return out


class QuestionForm:
    """The form (hidden unless a question waits) and its handler; build it inside the page's Blocks."""

    def __init__(self, turn: Turn) -> None:
        import gradio as gr

        self.turn = turn
        self.fields: list[Any] = []
        self.labels: list[Any] = []
        with gr.Column(visible=False, elem_id="question-form") as form:
            for n in range(MAX_FIELDS):
                self.labels.append(gr.Markdown("", visible=False, elem_id=f"question-{n}"))
                self.fields += [
                    gr.Textbox(show_label=False, visible=False, elem_id=f"answer-{n}-text"),
                    gr.Number(show_label=False, visible=False, elem_id=f"answer-{n}-number"),
                    gr.Checkbox(label="Yes", visible=False, elem_id=f"answer-{n}-check"),
                    gr.Dropdown(choices=[], show_label=False, visible=False, elem_id=f"answer-{n}-choice"),
                    gr.Textbox(show_label=False, visible=False, elem_id=f"answer-{n}-json", info="JSON"),
                ]
            self.error = gr.Markdown("", visible=False, elem_id="question-error")
            self.asked = gr.State(())  # the ids of the questions the form shows (their fields keep what was typed)
            self.send = gr.Button("Answer", variant="primary", elem_id="answer-btn", size="sm")
        self.form = form

    @property
    def outputs(self) -> list[Any]:
        return [self.form, *self.labels, *self.fields, self.error, self.asked]

    @property
    def inputs(self) -> list[Any]:
        return [self.asked]

    def wire(self, chatbot: Any, textbox: Any, state: Any, selector: Any, events: Sequence[Any]) -> Any:
        """Connect the button, and show the form (or hide it) after each of `events` (turns, clears); the
        button's event (its run may stop for an approval)."""
        done = self.send.click(self._answer, [state, selector, *self.fields], [chatbot, textbox, state, self.error],
                               show_progress="hidden")  # fmt: skip
        done.then(self.shown, [state, self.asked], self.outputs, queue=False)
        for event in events:
            event.then(self.shown, [state, self.asked], self.outputs, queue=False)
        return done

    async def _answer(self, session: Any, agent_name: Any, *values: Any) -> AsyncIterator[tuple]:
        import gradio as gr

        questions = waiting_questions(session)
        if not questions:
            yield gr.skip(), gr.skip(), session, gr.skip()
            return
        answers = answers_from(questions, values)
        try:
            if not answers:
                raise ValueError("answer at least one question")
            checked_answers(questions, answers)
        except ValueError as e:  # said in the form; nothing runs
            yield gr.skip(), gr.skip(), session, gr.Markdown(f"*{escape_markdown(str(e))}*", visible=True)
            return
        session.add_user(to_message(answer_message(answers)))
        async for display, box, state in self.turn(session, agent_name):
            yield display, box, state, gr.skip()

    def shown(self, session: Any, asked: tuple[str, ...]) -> list[Any]:
        """The form's updates for `session`: shown with a field per question it waits for, else hidden; as it is
        when it shows those questions already (`asked`: an answer that did not fit keeps what was typed)."""
        import gradio as gr

        questions = waiting_questions(session)[:MAX_FIELDS]
        ids = tuple(str(q["id"]) for q in questions)
        if ids and ids == tuple(asked):
            return [gr.skip() for _ in self.outputs]
        out: list[Any] = [gr.Column(visible=bool(questions))]
        labels, fields = [], []
        for n in range(MAX_FIELDS):
            q = questions[n] if n < len(questions) else None
            kind = field_kind(q.get("schema")) if q is not None else None
            labels.append(gr.Markdown(escape_markdown(str(q.get("question", ""))) if q else "", visible=q is not None))
            enum = [str(v) for v in ((q or {}).get("schema") or {}).get("enum") or []] if kind == "choice" else []
            fields += [
                gr.Textbox(value="", visible=kind == "text"),
                gr.Number(value=None, visible=kind == "number"),
                gr.Checkbox(value=False, visible=kind == "check"),
                gr.Dropdown(choices=enum, value=None, visible=kind == "choice"),
                gr.Textbox(value="", visible=kind == "json"),
            ]
        return out + labels + fields + [gr.Markdown("", visible=False), ids]


__all__ = ["MAX_FIELDS", "QuestionForm", "answers_from", "field_kind", "waiting_questions"]
