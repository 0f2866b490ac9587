"""Chat in the terminal: the answer streams as it comes, tool calls wait for the user's approval."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from chatagent.rag.chunking import source_label
from chatagent.run.approval import approval_message, pending_approval
from chatagent.schema import USER, ContentItem, Message, drop_unanswered_calls, to_message
from chatagent.schema.fragment import as_fragment
from chatagent.schema.stream import Response
from chatagent.utils.keys import mask_secrets

if TYPE_CHECKING:
    from chatagent.agent import Agent
    from chatagent.schema import Message
    from chatagent.sessions import Session

logger = logging.getLogger(__name__)


class TerminalPrinter:
    """Prints an agent's incremental output: text as it streams, reasoning dimmed, tool calls and results."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.dim, self.bold, self.reset = ("\033[2m", "\033[1m", "\033[0m") if color else ("", "", "")
        self.current: tuple[int, str] | None = None  # (index, what) being printed

    def _switch(self, index: int, what: str) -> None:
        if self.current != (index, what):
            if self.current is not None:
                self.out.write(self.reset + "\n")
            self.current = (index, what)
            if what == "reasoning":
                self.out.write(self.dim + "[thinking] ")

    def feed(self, fragments: Sequence[Message]) -> None:
        w = self.out.write
        for f in map(as_fragment, fragments):
            i = f.index
            if f.replace:  # what was shown is replaced (a plugin blocked or rewrote the answer)
                self._switch(i, "replaced")
                blocked = (f.extra or {}).get("blocked_by")
                w(
                    f"{self.bold}[blocked by {blocked}]{self.reset} "
                    if blocked
                    else f"{self.dim}[replaced]{self.reset} "
                )
                w(f.text)
                continue
            if f.role == "function":
                self._switch(i, "result")
                text = f.text
                w(f"{self.dim}[result of {f.name}] {text[:500]}{' …' if len(text) > 500 else ''}{self.reset}")
                continue
            if f.reasoning_content:
                self._switch(i, "reasoning")
                w(f.reasoning_content)
            if f.text:
                self._switch(i, "text")
                w(f.text)
            if f.function_call is not None:
                self._switch(i, "call")
                w(f"{self.bold}[tool] {f.function_call.name}({f.function_call.arguments}){self.reset}")
        self.out.flush()

    def end(self, note: str = "") -> None:
        self.out.write(self.reset + (f"\n{note}" if note else "") + "\n")
        self.out.flush()
        self.current = None

    def footer(self, answer: list) -> None:
        """After an answer: a note if the token limit cut it, and the sources it came with."""
        final = next((m for m in reversed(answer) if m.role == "assistant" and m.function_call is None), None)
        extra = (final.extra if final is not None else None) or {}
        w = self.out.write
        if extra.get("stop_reason") == "length":
            w(f"{self.dim}[cut off: the answer reached its token limit (max_tokens)]{self.reset}\n")
        elif extra.get("stop_reason") == "repetition":
            w(f"{self.dim}[ended: the model began to repeat itself]{self.reset}\n")
        sources = extra.get("sources")
        if sources:
            w(f"{self.dim}Sources:\n")
            for n, src in enumerate(sources, 1):
                snippet = str(src.get("text", ""))
                w(f"  {n}. {source_label(src)}: {snippet[:100]}{' …' if len(snippet) > 100 else ''}\n")
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
        for fragments in run:
            printer.feed(fragments)
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
        out.write(f"The agent wants to run {call['name']}({call['arguments']}).\n")
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

    A tool call that needs approval is asked about (y/N) before the run goes on.
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
                note = mask_secrets(f"[error] {type(e).__name__}: {e}")
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
            if not waiting:
                break
            history.append(ask_approval(waiting, read, out))
