"""Output held back until a run's output checks have passed: no caller sees text an output check blocks or rewrites.

A plugin's output checks are its `after_model` and `after_run` hooks (they see text once it is made, and may block,
rewrite or retry it) and `check_text` (a piece of text before it is shown). In a run with any of them, `OutputHold`
holds back the text and reasoning of assistant messages; tool calls, tool results, marks (`extra`) and the start of
each message pass at once, so a caller sees the run's progress. How much text may go out before the end is the least
that every output-checking plugin allows (`Plugin.releases`):

- None (the default): nothing; the text goes out once `after_run` has passed, as it leaves it;
- 'paragraph' or 'sentence': each complete one, once every `check_text` hook passed it (or rewrote it). Text that went
  out is final: a later block is added after it, and an `after_run` may not rewrite it or retry.

`check_text` hooks see the text in pieces of their unit whatever goes out when: the coarsest unit a plugin names.

What a plugin derives from the model's text as it streams (a map it adds in `before_model`: structured output's
partial object, `extra['parsed']`) is derived from what the hold lets out when any check judges content
(`Plugin.checks_content`): a partial object never shows what a check then withholds or rewrites.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from chatagent.run.plugin import OUTPUT_HOOKS, Plugins, failed
from chatagent.schema import ASSISTANT, ContentItem, Message, content_text
from chatagent.schema.fragment import Fragment
from chatagent.schema.stream import Collector

if TYPE_CHECKING:
    from chatagent.run.protocol import Runnable

#: where a piece of text ends: a sentence (its closing marks and the space after them, or a line's end), a paragraph
UNITS = {
    "sentence": re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？]+[”’」』）]*|\n+"),
    "paragraph": re.compile(r"\n[ \t]*\n\s*"),
}
_ORDER = ("sentence", "paragraph", None)  # finer to coarser: None is the whole answer


def output_hold(agent: Runnable, plugins: Plugins) -> OutputHold | None:
    """The hold of a run under `plugins` (None when none of them checks output)."""
    checking = {id(p): p for hook in OUTPUT_HOOKS for p, _ in plugins.each(hook)}
    if not checking:
        return None
    releases = [_releases(p) for p in checking.values()]
    texts = [_releases(p) for p, _ in plugins.each("check_text")]
    unit = max(texts, key=_ORDER.index) if texts else None
    if unit is None and texts:
        raise TypeError("a plugin with check_text must say which pieces it checks: releases='sentence' or 'paragraph'")
    hold = OutputHold(agent, plugins, max(releases, key=_ORDER.index), unit)
    hold.judges = any(getattr(p, "checks_content", True) for p in checking.values())
    return hold


def _releases(plugin: Any) -> str | None:
    value = getattr(plugin, "releases", None)
    if value not in _ORDER:
        raise ValueError(f"{plugin!r}: releases must be None, 'sentence' or 'paragraph', got {value!r}")
    return value


class OutputHold:
    """What a run with output checks shows (see the module docstring). `take(fragments)` records them and returns
    what may be shown now; `flush()` checks what is left of the last message when the run's output is complete;
    `made` is the response as made (checked pieces only), for `after_run`."""

    __slots__ = (
        "agent",
        "plugins",
        "releases",
        "unit",
        "checks",
        "made",
        "shown_len",
        "pending",
        "text",
        "reasoning",
        "judges",
    )

    def __init__(self, agent: Runnable, plugins: Plugins, releases: str | None, unit: str | None) -> None:
        self.agent, self.plugins = agent, plugins
        self.releases = releases  # None: the whole answer, at the end
        self.unit = unit  # the pieces check_text hooks get (None: they have none)
        self.checks = plugins.each("check_text")
        self.made = Collector()
        self.shown_len = 0  # the messages a caller has seen start
        self.pending = -1  # the message whose last piece of text waits for its end
        self.text = ""  # that piece
        self.reasoning = ""
        # whether a check judges what the answer says: what plugins derive from a model's text (the partial object
        # of structured output) is then derived from what the hold lets out, never from the text it holds
        self.judges = True

    @property
    def holds_all(self) -> bool:
        """Whether it holds every piece of text until the end (no check_text, nothing released early)."""
        return self.unit is None and self.releases is None

    def take(self, fragments: list[Fragment]) -> list[Fragment]:
        if self.unit is None and self.releases is None:  # the usual case: only the start of a message shows
            return self._whole(fragments)
        out: list[Fragment] = []
        for f in fragments:
            if f.index != self.pending and self.pending >= 0:
                out += self._close()
            if f.role != ASSISTANT:
                self._made(f)
                out.append(f)
                continue
            checked = f if self.unit is None else self._checked(f)
            self._made(checked)
            shown = checked if self.releases is not None else _without_text(checked)
            if _carries(shown) or shown.index >= self.shown_len or shown.replace:
                out.append(shown)
        for f in out:
            if f.index >= self.shown_len:
                self.shown_len = f.index + 1
        return out

    def _whole(self, fragments: list[Fragment]) -> list[Fragment]:
        """`take` holding the whole answer, with no check_text: everything is made; what shows is what starts a
        message, replaces one, calls a tool or marks one, with its text taken out, and messages of other roles."""
        self.made.add(fragments)
        out: list[Fragment] = []
        for f in fragments:
            if f.role != ASSISTANT:
                out.append(f)
            elif f.index >= self.shown_len or f.replace or f.function_call is not None or f.extra:
                out.append(_without_text(f))
            else:
                continue
            if f.index >= self.shown_len:
                self.shown_len = f.index + 1
        return out

    def flush(self) -> list[Fragment]:
        """The run's output is complete: the last message's last piece, checked; what may be shown now."""
        return self._close()

    def keeps_released(self, shown: list[Message], new: list[Message]) -> bool:
        """Whether `new` (an `after_run`'s response) leaves the text already shown as it was."""
        if self.releases is None:
            return True
        for old, m in zip(shown, new, strict=False):
            if not content_text(m.content).startswith(content_text(old.content)):
                return False
            if not (m.reasoning_content or "").startswith(old.reasoning_content or ""):
                return False
        return True

    # ---- pieces ----------------------------------------------------------------------------------------------

    def _made(self, f: Fragment) -> None:
        self.made.add([f])

    def _checked(self, f: Fragment) -> Fragment:
        """`f` with only its complete, checked pieces of text; the rest waits in `pending`."""
        if f.replace:
            self.text = self.reasoning = ""
        self.pending = f.index
        content = f.content
        if isinstance(content, str):
            self.text, content = self._complete(self.text, content)
        else:  # text items are whole pieces (after what waited of this message)
            first, self.text = self.text, ""
            content = [ContentItem(text=self._check(first + item.value)) if item.kind == "text" else item
                       for item in content]  # fmt: skip
        reasoning = f.reasoning_content
        if reasoning:
            self.reasoning, reasoning = self._complete(self.reasoning, reasoning)
        return f.copy(content=content, reasoning_content=reasoning or None)

    def _complete(self, waiting: str, piece: str) -> tuple[str, str]:
        """(what still waits, the checked complete pieces) once `piece` is added to what waited."""
        text = waiting + piece
        assert self.unit is not None
        end = 0
        for m in UNITS[self.unit].finditer(text, max(0, len(waiting) - 4)):
            end = m.end()
        if not end:
            return text, ""
        done = text[:end]
        cuts = [0, *(m.end() for m in UNITS[self.unit].finditer(done))]
        return text[end:], "".join(self._check(done[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a)

    def _close(self) -> list[Fragment]:
        """The pending message's last pieces, checked, as a fragment (also made); [] if nothing waited."""
        i, text, reasoning = self.pending, self.text, self.reasoning
        self.pending, self.text, self.reasoning = -1, "", ""
        if i < 0 or not (text or reasoning):
            return []
        # named as the message is (a nested run's message keeps its agent's name in the caller's response)
        f = Fragment.unchecked(ASSISTANT, self._check(text) if text else "", self.made.name_of(i), None,
                               self._check(reasoning) if reasoning else None, None, i)  # fmt: skip
        self._made(f)
        return [f] if self.releases is not None else []

    def _check(self, text: str) -> str:
        """`text` as every check_text hook leaves it (a hook may raise Blocked)."""
        plugins = self.plugins
        for p, fn in self.checks:
            out = plugins.call(p, "check_text", fn, self.agent, text)
            if out is None:
                continue
            if not isinstance(out, str):
                failed(p, "check_text", TypeError(f"it returned {type(out).__name__}, not the text (a str) or None"))
                continue
            text = out
        return text


def _without_text(f: Fragment) -> Fragment:
    return f.copy(content="", reasoning_content=None) if (f.content or f.reasoning_content) else f


def _carries(f: Fragment) -> bool:
    """Whether a fragment shows something: text, reasoning, a call or marks."""
    return bool(f.content or f.reasoning_content or f.function_call is not None or f.extra)


__all__ = ["UNITS", "OutputHold", "output_hold"]
