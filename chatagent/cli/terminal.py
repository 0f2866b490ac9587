"""Chat in the terminal: the answer streams as it comes, tool calls wait for the user's approval.

Nothing read from a model, a tool or a store reaches the terminal raw: control characters other than newline and
tab, and format characters (bidi overrides, zero-width spaces), are shown escaped (`printable`), so no text can move
the cursor, overwrite the approval prompt, set the clipboard or the window title, fake the prompt, or show itself
reversed or hidden.
"""

from __future__ import annotations

import logging
import sys
import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from chatagent.rag.chunking import source_label
from chatagent.run.approval import approval_message, pending_approval
from chatagent.run.interrupts import PENDING_QUESTIONS, answer_message, checked_answers
from chatagent.schema import USER, ContentItem, Message, drop_unanswered_calls, to_message
from chatagent.schema.fragment import as_fragment
from chatagent.schema.stop_reason import StopReason
from chatagent.schema.stream import Response
from chatagent.utils.keys import mask_secrets

if TYPE_CHECKING:
    from chatagent.agent import Agent
    from chatagent.schema import Message
    from chatagent.sessions import Session

logger = logging.getLogger(__name__)

_ESCAPED = ("Cc", "Cf")  # controls, and format characters (bidi overrides, zero-width, joiners, tags...)


def printable(text: str) -> str:
    """`text` safe to write to a terminal: every control character (but newline and tab) and every format
    character (Unicode category Cf: the bidirectional overrides that reorder what is shown, zero-width spaces and
    joiners that hide text) shown as `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN`."""
    if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():  # (no Cc or Cf at all)
        return text
    return "".join(_escaped(c) if c not in "\n\t" and unicodedata.category(c) in _ESCAPED else c for c in text)


def _escaped(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class TerminalPrinter:
    """Prints an agent's incremental output: text as it streams, reasoning dimmed, tool calls and results."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.dim, self.bold, self.reset = ("\033[2m", "\033[1m", "\033[0m") if color else ("", "", "")
        self.current: tuple[int, str] | None = None  # (index, what) being printed
        self.passages: set[int] = set()  # the answers that began with the passage they summarise

    def _switch(self, index: int, what: str) -> None:
        if self.current != (index, what):
            if self.current is not None:
                self.out.write(self.reset + "\n")
            self.current = (index, what)
            if what == "reasoning":
                self.out.write(self.dim + "[thinking] ")
            elif what == "text" and index in self.passages:
                self.out.write(f"{self.dim}[the model's summary of this passage; it may be wrong]{self.reset}\n")

    def passage(self, passage: dict) -> str:
        """The passage an answer summarises: its file and page, then its text, the matching sentences in bold."""
        text = str(passage.get("text", ""))
        parts, at = [], 0
        for start, end in sorted((int(a), int(b)) for a, b in passage.get("highlights") or []):
            if at <= start < end <= len(text):
                parts += [printable(text[at:start]), self.bold, printable(text[start:end]), self.reset]
                at = end
        parts.append(printable(text[at:]))
        return f"{self.dim}[passage: {printable(source_label(passage))}]{self.reset}\n" + "".join(parts).strip()

    def feed(self, fragments: Sequence[Message]) -> None:
        w = self.out.write
        for f in map(as_fragment, fragments):
            i = f.index
            if f.replace:  # what was shown is replaced (a plugin blocked or rewrote the answer)
                self._switch(i, "replaced")
                blocked = (f.extra or {}).get("blocked_by")
                w(
                    f"{self.bold}[blocked by {printable(str(blocked))}]{self.reset} "
                    if blocked
                    else f"{self.dim}[replaced]{self.reset} "
                )
                w(printable(f.text))
                continue
            if f.role == "function":
                self._switch(i, "result")
                text = f.text
                shown = printable(text[:500]) + (" …" if len(text) > 500 else "")
                w(f"{self.dim}[result of {printable(f.name or '')}] {shown}{self.reset}")
                continue
            passage = (f.extra or {}).get("passage")
            if passage and i not in self.passages:
                self._switch(i, "passage")
                w(self.passage(passage))
                self.passages.add(i)
            if f.reasoning_content:
                self._switch(i, "reasoning")
                w(printable(f.reasoning_content))
            if f.text:
                self._switch(i, "text")
                w(printable(f.text))
            if f.function_call is not None:
                self._switch(i, "call")
                call = f.function_call
                w(f"{self.bold}[tool] {printable(call.name)}({printable(call.arguments)}){self.reset}")
        self.out.flush()

    def end(self, note: str = "") -> None:
        self.out.write(self.reset + (f"\n{note}" if note else "") + "\n")
        self.out.flush()
        self.current = None
        self.passages.clear()

    def footer(self, answer: list) -> None:
        """After an answer: a note if the token limit cut it, and the sources it came with."""
        final = next((m for m in reversed(answer) if m.role == "assistant" and m.function_call is None), None)
        extra = (final.extra if final is not None else None) or {}
        w = self.out.write
        if extra.get("stop_reason") == StopReason.LENGTH:
            w(f"{self.dim}[cut off: the answer reached its token limit (max_tokens)]{self.reset}\n")
        elif extra.get("stop_reason") == StopReason.REPETITION:
            w(f"{self.dim}[ended: the model began to repeat itself]{self.reset}\n")
        elif extra.get("stop_reason") == StopReason.PROMPT_ECHO:
            w(f"{self.dim}[ended: the model began to recite its instructions; that part was removed]{self.reset}\n")
        sources = extra.get("sources")
        if sources:
            w(f"{self.dim}Sources:\n")
            for n, src in enumerate(sources, 1):
                snippet = str(src.get("text", ""))
                shown = printable(snippet[:100]) + (" …" if len(snippet) > 100 else "")
                w(f"  {n}. {printable(source_label(src))}: {shown}\n")
            w(self.reset)
        self.out.flush()


def settle_pending(agent: Agent, session: Session, read: Callable[[str], str], printer: TerminalPrinter,
                   out: TextIO) -> bool:  # fmt: skip
    """Before a turn on `session`: a turn that did not end (its process died, its run failed) is resumed or dropped,
    as the user says; False when resuming it failed (the new message then waits)."""
    pending = session.pending_turn
    if pending is None or pending.state == "paused":
        return True
    why = f"failed: {pending.error}" if pending.error else "was interrupted"
    answer = read(f"(the last turn {why}; resume it? [Y/n]) ").strip().lower()
    if answer in ("n", "no"):
        session.discard_pending()
        out.write("(dropped)\n")
        return True
    run = agent.resume(session=session, delta_stream=True)
    try:
        for fragments in run:  # (dicts: what resume() yields)
            printer.feed([as_fragment(f) for f in fragments])
    except Exception as e:  # shown; the turn stays pending
        printer.end(mask_secrets(f"[error] {type(e).__name__}: {e}"))
        return False
    finally:
        run.close()
    printer.end("")
    return True


def ask_approval(waiting: list[dict], read: Callable[[str], str], out: TextIO) -> Message:
    """Ask the user about each tool call waiting for approval (y/N); the approval message that resumes the run."""
    decisions: dict[str, bool] = {}
    for call in waiting:
        arguments = printable(str(call["arguments"])).replace("\n", "\\n")  # one line, every character as it is
        out.write(f"The agent wants to run {printable(str(call['name']))}({arguments}).\n")
        try:
            answer = read("allow? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        decisions[call["id"]] = answer.strip().lower() in ("y", "yes")
    reason = ""
    if not all(decisions.values()):
        try:
            reason = read("why not (optional, told to the agent)? ").strip()
        except (EOFError, KeyboardInterrupt):
            reason = ""
    return to_message(approval_message(decisions, reason))


def ask_questions(questions: list[dict], read: Callable[[str], str], out: TextIO) -> Message:
    """Ask the user each question a tool asked (`chatagent.ask_user`), again until the answer fits its schema; the
    answer message that resumes the run. Ctrl-D or Ctrl-C at a question answers it with nothing (an empty text)."""
    answers: dict[str, object] = {}
    for q in questions:
        out.write(f"The agent asks: {printable(str(q['question']))}\n")
        while True:
            try:
                answer = read("answer> ").strip()
            except (EOFError, KeyboardInterrupt):
                answer = ""
            try:
                answers.update(checked_answers([q], {q["id"]: answer}))
                break
            except ValueError as e:
                out.write(printable(str(e)) + "\n")
    return to_message(answer_message(answers))


def chat_loop(
    agent: Agent,
    files: Sequence[str] = (),
    *,
    read: Callable[[str], str] = input,
    out: TextIO | None = None,
    color: bool | None = None,
    session: Session | None = None,
) -> None:
    """A terminal chat: each answer streams; Ctrl-C stops the answer (and the model's stream), not the chat.

    A tool call that needs approval is asked about (y/N) before the run goes on; a question a tool asks
    (`chatagent.ask_user`) is asked at an `answer>` prompt.
    /clear starts over, /exit (or Ctrl-D) leaves. `files` are attached to the first message. With `session`, the
    conversation is the stored one and each turn is stored (a stopped answer too, marked interrupted).
    """
    if out is None:
        stdout: TextIO = sys.stdout
        out = stdout
    printer = TerminalPrinter(out, out.isatty() if color is None else color)
    history: list[Message] = []
    pending_files = list(files)
    while True:
        try:
            line = read("you> ")
        except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C at the prompt: leave
            out.write("\n")
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return
        if text == "/clear":
            history, pending_files = [], list(files)
            if session is not None:
                session.clear()
            out.write("(conversation cleared)\n")
            continue
        if pending_files:
            history.append(Message(USER, [ContentItem(text=text)] + [ContentItem(file=f) for f in pending_files]))
            pending_files = []
        else:
            history.append(Message(USER, text))
        if session is not None and not settle_pending(agent, session, read, printer, out):
            continue
        while True:  # a turn, and its resumptions while tool calls wait for the user's approval
            response = Response()
            # with a session, `history` holds only what the store does not have yet
            run = agent.run(history, delta_stream=True, session=session)
            note = ""
            try:
                for fragments in run:
                    response.add(fragments)
                    printer.feed(fragments)
            except KeyboardInterrupt:
                note = "[stopped]"
            except Exception as e:  # shown, and the chat goes on
                logger.debug("the agent failed", exc_info=True)
                note = printable(mask_secrets(f"[error] {type(e).__name__}: {e}"))
            finally:
                run.close()
            printer.end(note)
            printer.footer(response.messages)
            if session is not None:
                if not note.startswith("[error]"):  # stored: completed, or stopped (a failed turn is not stored)
                    history = []
            else:
                answer = response.messages
                history.extend(drop_unanswered_calls(answer) if note else answer)
            waiting = None if note else pending_approval(response.messages)
            asked = None if note or waiting else (response.messages[-1].extra or {}).get(PENDING_QUESTIONS)
            if waiting:
                history.append(ask_approval(waiting, read, out))
            elif asked:
                history.append(ask_questions(asked, read, out))
            else:
                break
