"""Reading a ReAct reply (Thought / Action / Action Input / Observation / Final Answer), whole or chunk by chunk.

Parsing is lenient about what models really write: markers at the start of a line in any case,
with extra spaces, a full-width colon or Markdown (`**Action:**`, `**Action**:`, `### Thought:`);
a missing Action Input; arguments on the line after `Action:` without `Action Input:`; a tool name in
backticks or with `()`. **When a reply has both an Action and a Final Answer,
the one that comes first wins**: an Action followed by a Final Answer means the model guessed the result
before seeing it, so the tool runs and the guess is dropped; a Final Answer followed by an Action is the
answer, and the action is ignored (logged).

Streaming (`ReActParser.feed`) shows the Thought (as reasoning) and the Final Answer as they form, but never a
half-written action: from `Action:` on, text is held back until the reply is complete. Each chunk is
examined once, and only the start of a line that may still become a marker is held, so a whole reply
costs time linear in its length.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

logger = logging.getLogger("chatagent.react")

_MARKER = re.compile(
    r"[ \t]*[*_#>`]*[ \t]*(thought|action[ \t]*input|action|observation|final[ \t]*answer)"
    r"[ \t]*[*_`]*[ \t]*[:：][*_`]*",
    re.IGNORECASE,
)
_KEYWORDS = ("thought", "action input", "action", "observation", "final answer")
_SPACES = re.compile(r"[ \t]+")
_AFTER_KEYWORD = re.compile(r"[ \t*_`]*")
MAX_MARKER_PREFIX = 40  # a line start longer than this without a colon is not a marker

PLAIN, THOUGHT, FINAL, ACTION = "plain", "thought", "final", "action"


def _kind(keyword: str) -> str:
    k = _SPACES.sub("", keyword.lower())
    return {"actioninput": "input", "finalanswer": "final"}.get(k, k)


def _maybe_marker(line: str) -> bool:
    """Whether `line` (the start of a line, no newline yet) may still become a marker."""
    if len(line) > MAX_MARKER_PREFIX:
        return False
    s = _SPACES.sub(" ", line.lstrip(" \t*_#>`").lower())
    if not s:
        return True
    return any(k.startswith(s) or (s.startswith(k) and _AFTER_KEYWORD.fullmatch(s, len(k))) for k in _KEYWORDS)


@dataclass
class ReActStep:
    """What one reply asked for: `kind` is 'final', 'action' or 'malformed' (then `problem` says why)."""

    kind: str
    thought: str = ""
    answer: str = ""
    action: str | None = None
    action_input: str | None = None
    problem: str | None = None
    raw: str = ""


class ReActParser:
    """Reads a ReAct reply chunk by chunk: `feed()` returns the (reasoning, content) text that can be shown
    now; `finish()` the rest and the parsed step. Text from `Action:` on is never shown. `pieces()` gives what
    `feed` or `finish` would have shown as (reasoning, content) pairs in the order the reply wrote them (each pair
    one of the two), so that what is shown follows the reply whatever its chunking."""

    def __init__(self) -> None:
        self.mode = PLAIN
        self.cut = False  # the reply is over (an observation or a second action began): ignore the rest
        self._line_start = True
        self._pending = ""  # the start of a line held while it may still become a marker
        self._newlines = ""  # newlines held back: dropped when a marker follows, else shown before the next text
        self._skip_space = False
        self._skip_decor = 0  # closing `*`/`_` of a Markdown marker still to drop (split across chunks)
        self._raw: list[str] = []
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._name: list[str] | None = None
        self._input: list[str] | None = None
        self._section: list[str] = []
        self._thought_seen = self._final_seen = self._ignored_action = False
        self._out: list[tuple[bool, str]] = []  # (reasoning?, text) to show, in the reply's order

    def feed(self, chunk: str, _last: bool = False) -> tuple[str, str]:
        """Add a piece of the reply; the (reasoning, content) text to show now."""
        self._read(chunk, _last)
        return self._take()

    def pieces(self, chunk: str | None = None) -> list[tuple[str, str]]:
        """Add a piece of the reply (None: the reply ended, as `finish` without its step); what to show now as
        (reasoning, content) pairs in the reply's order."""
        if chunk is None:
            self._read_pending()
        else:
            self._read(chunk, False)
        out: list[tuple[str, str]] = []
        for thought, text in self._out:
            if out and (out[-1][0] != "") == thought:  # the same kind as the last: one run of text
                r, c = out[-1]
                out[-1] = (r + text, c) if thought else (r, c + text)
            else:
                out.append((text, "") if thought else ("", text))
        self._out.clear()
        return out

    def _read(self, chunk: str, _last: bool) -> None:
        if self.cut or not chunk:
            return
        text = self._pending + chunk if self._pending else chunk
        self._pending = ""
        pos, n = 0, len(text)
        while pos < n:
            nl = text.find("\n", pos)
            end = n if nl < 0 else nl + 1
            if self._line_start:
                match = _MARKER.match(text, pos, end)
                if match is not None and match.end() == n and not _last and n - pos <= MAX_MARKER_PREFIX:
                    self._pending = text[pos:]  # the marker's decoration (`**`) may go on in the next chunk
                    break
                if match is not None and self._marker(_kind(match.group(1))):
                    if self.cut:
                        break
                    pos = match.end()
                    self._line_start = False
                    self._skip_space = True
                    marker = match.group(0).strip()
                    opened = len(marker) - len(marker.lstrip("*_"))
                    closed = len(marker) - len(marker.rstrip("*_"))
                    self._skip_decor = max(opened - closed, 0)
                    continue
                if match is None and nl < 0 and not _last and _maybe_marker(text[pos:]):
                    self._pending = text[pos:]
                    break
            self._text(text[pos:end])
            pos = end
            self._line_start = nl >= 0
        self._raw.append(text[:pos])

    def finish(self) -> tuple[str, str, ReActStep]:
        """The end of the reply: the last (reasoning, content) text to show, and the parsed step."""
        self._read_pending()
        r, c = self._take()
        return r, c, self.step()

    def _read_pending(self) -> None:
        if self._pending and not self.cut:
            pending, self._pending = self._pending, ""
            self._read(pending, True)

    # ---- internals -------------------------------------------------------------------------------------

    def _take(self) -> tuple[str, str]:
        r = "".join(text for thought, text in self._out if thought)
        c = "".join(text for thought, text in self._out if not thought)
        self._out.clear()
        return r, c

    def _marker(self, kind: str) -> bool:
        """Act on a marker; False when it is to be read as ordinary text."""
        if kind == "observation":
            self.cut = True
            return True
        if self.mode == ACTION:
            if kind == "input" and self._input is None:
                self._input = self._section = []
            else:
                self.cut = True
            return True
        if self.mode == FINAL:
            if kind in ("action", "input"):
                self._ignored_action = self.cut = True
                return True
            return False
        if kind == "thought":
            self._newlines = "\n" if self._reasoning else ""
            self.mode, self._thought_seen = THOUGHT, True
        elif kind == "final":
            self._newlines = "\n\n" if self._content else ""
            self.mode, self._final_seen = FINAL, True
        else:
            self._newlines = ""
            self.mode = ACTION
            if kind == "action":
                self._name = self._section = []
            else:
                self._input = self._section = []
        return True

    def _text(self, s: str) -> None:
        if self._skip_space:
            if self._skip_decor:
                rest = s.lstrip(" \t")
                decor = len(rest) - len(rest.lstrip("*_"))
                s = rest[min(decor, self._skip_decor) :]
                self._skip_decor -= min(decor, self._skip_decor)
            stripped = s.lstrip()
            if not stripped:
                return
            s = stripped
            self._skip_space = False
        if self.mode == ACTION:
            self._section.append(s)
            return
        body = s.rstrip("\r\n")
        if body:
            out = self._newlines + body if self._newlines else body
            self._newlines = ""
            thought = self.mode == THOUGHT
            (self._reasoning if thought else self._content).append(out)
            self._out.append((thought, out))
        if len(body) < len(s):
            self._newlines += s[len(body) :].replace("\r", "")

    def step(self) -> ReActStep:
        """The parsed step (once the reply ended: after `finish()` or `pieces(None)`)."""
        thought, answer, raw = "".join(self._reasoning), "".join(self._content), "".join(self._raw).strip()
        if self._ignored_action:
            logger.warning("ReAct: the reply had an Action after its Final Answer; the action was ignored")
        if self._name is not None or self._input is not None:
            name_text = "".join(self._name).strip() if self._name is not None else None
            inp = "".join(self._input).strip() if self._input is not None else None
            if name_text is None:
                return ReActStep("malformed", thought, answer, None, inp, "input_without_action", raw)
            name, _, rest = name_text.partition("\n")
            if inp is None and rest.strip():
                inp = rest.strip()  # arguments on the next line, without "Action Input:"
            name = name.strip().strip("*`'\"[]").strip()
            name = name.removesuffix("()").strip()
            if not name:
                return ReActStep("malformed", thought, answer, None, inp, "no_tool_name", raw)
            return ReActStep("action", thought, answer, name, inp, None, raw)
        if self._final_seen:
            return ReActStep("final", thought, answer, raw=raw)
        if self._thought_seen:
            return ReActStep("malformed", thought, answer, problem="no_action", raw=raw)
        if not answer.strip():
            return ReActStep("malformed", thought, answer, problem="empty", raw=raw)
        return ReActStep("final", thought, answer, raw=raw)


def parse_react(text: str) -> ReActStep:
    """Parse a complete ReAct reply (the same code path as streaming)."""
    parser = ReActParser()
    parser.feed(text)
    return parser.finish()[2]


__all__ = ["ReActParser", "ReActStep", "parse_react"]
