"""chatagent messages -> Gradio chatbot messages: escaped text, collapsible tool and reasoning blocks.

Pure functions (no Gradio import), so they are cheap to test and to call on every streamed chunk.
Everything that came from a model, a tool or a user is escaped: `<` and `&` outside Markdown code become
entities, so a reply holding `<script>` or `<img onerror=...>` shows as text while lists, tables and code
still render as Markdown. Markdown images become links: an image the page loads by itself is a request to
wherever its URL says, carrying whatever the URL holds (a prompt-injected document's way to leak the
conversation); a link needs a click. The page's Content-Security-Policy (chatagent/gui/security.py) is the second guard.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from typing import Any

from chatagent.agents.user import pending_input
from chatagent.errors import ModelServiceError, RunDeadlineExceeded
from chatagent.gui.icons import badge, icon
from chatagent.rag.chunking import source_label
from chatagent.run.approval import APPROVAL, PENDING_APPROVAL
from chatagent.run.interrupts import ANSWERS, PENDING_QUESTIONS
from chatagent.run.plugin import BLOCKED_BY, BLOCKED_REASON
from chatagent.schema import ASSISTANT, FUNCTION, USER, Message, content_text
from chatagent.schema.fragment import STREAMING_CALL
from chatagent.schema.stop_reason import StopReason
from chatagent.sessions.errors import SessionStoreError
from chatagent.utils.keys import mask_secrets

THINKING_TITLE = f"{icon('thinking')} Thinking"
CUT_NOTE = f"{icon('cut')} *Cut off: the answer reached its token limit (`max_tokens`).*"
LOOP_NOTE = f"{icon('cut')} *Ended: the model began to repeat itself.*"
PASSAGE_TITLE = "The best-matching passage of your files:"
SUMMARY_LABEL = (
    "*The model's summary of this passage (a small model can be wrong: the passage is what your file says):*"
)
ECHO_NOTE = f"{icon('cut')} *Ended: the model began to recite its instructions; that part was removed.*"
# a fence opens with 3+ backticks (no backtick after them on the line) or 3+ tildes, indented 0-3 spaces
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_IMAGE_START = "!["
_AS_LINK = "!\u200b["  # a zero-width space after `!`: `![alt](url)` reads as "!" and a link
_SAFE_NAME = re.compile(r"[^\w .:/@-]")


def chat_message(role: str, text: str, title: str | None = None, status: str = "done") -> dict[str, Any]:
    """A Gradio chatbot message; with a `title` it shows as a collapsed block (open, with a spinner, while its
    `status` is 'pending').

    The text goes as a typed text part, which Gradio passes through as is (a bare string would be
    dedented and have its tabs expanded, changing code the model wrote).
    """
    msg: dict[str, Any] = {"role": role, "content": {"type": "text", "text": text}}
    if title is not None:
        msg["metadata"] = {"title": title, "status": status}
    return msg


def message_text(msg: dict[str, Any]) -> str:
    """The text of a message made by `chat_message`."""
    return msg["content"]["text"]


def escape_html(text: str) -> str:
    """`&` and `<` as entities: no tag, comment or entity of the input can reach the page as HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def escape_markdown(text: str) -> str:
    """Escape HTML in Markdown text so no tag can form, keeping Markdown (lists, tables, code) working.

    In prose `<` and `&` become entities. Fenced code blocks (found by the rules of marked, the renderer
    Gradio uses) are left as they are: the renderer shows code literally, and entities there would
    show as `&lt;`. Inside inline code spans, whose boundaries renderers judge differently around
    links, tables and escapes, a `<` that could open a tag gets an invisible zero-width space after it,
    so it stays text whichever way the span is read. Gradio's own sanitiser stays on as a second guard.
    """
    if "<" not in text and "&" not in text and _IMAGE_START not in text:
        return text
    out: list[str] = []
    prose: list[str] = []
    fence: re.Pattern[str] | None = None
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if fence is not None:
            out.append(line)
            if fence.fullmatch(body):
                fence = None
            continue
        m = _FENCE_OPEN.match(body)
        if m:
            out.append(_escape_inline("".join(prose)))
            prose = []
            fence = re.compile(r" {0,3}" + re.escape(m.group(1)) + r"[~`]* *")
            out.append(line)
            continue
        prose.append(line)
    out.append(_escape_inline("".join(prose)))
    return "".join(out)


def _escape_inline(text: str) -> str:
    """Escape prose; in inline code spans (n backticks closed by exactly n) only defuse tag and image openings."""
    if "<" not in text and "&" not in text and _IMAGE_START not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find("`", i)
        if j < 0:
            out.append(_prose(text[i:]))
            break
        out.append(_prose(text[i:j]))
        k = j
        while k < n and text[k] == "`":
            k += 1
        close = re.compile(r"(?<!`)" + text[j:k] + r"(?!`)").search(text, k)
        if close is None:
            out.append(text[j:k])
            i = k
        else:
            out.append(_TAG_START.sub("<\u200b", text[j : close.end()]).replace(_IMAGE_START, _AS_LINK))
            i = close.end()
    return "".join(out)


def _prose(text: str) -> str:
    return escape_html(text).replace(_IMAGE_START, _AS_LINK)


def code_block(text: str, lang: str = "") -> str:
    """`text` in a fenced code block whose fence no backtick run inside the text can close."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def speaker_badge(name: str) -> str:
    """A coloured dot that stays the same for a speaker's name: its avatar in a group chat."""
    return badge(zlib.crc32(name.encode()))


def safe_name(name: str) -> str:
    """A tool or speaker name reduced to harmless characters, for titles and labels."""
    return _SAFE_NAME.sub("", name)[:80] or "?"


def _pretty_json(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except (ValueError, TypeError):
        return arguments


def render_user(msg: Message) -> list[dict[str, Any]]:
    """A user message: its text (escaped) and a line per attached file."""
    if isinstance(msg.content, str):
        return [chat_message("user", escape_markdown(msg.content))]
    parts: list[str] = []
    for item in msg.content:
        if item.kind == "text":
            parts.append(escape_markdown(item.value))
        else:
            kind = item.kind if item.kind in ("image", "audio", "video") else "file"
            parts.append(f"{icon(kind)} {escape_html(os.path.basename(item.value))}")
    return [chat_message("user", "\n\n".join(p for p in parts if p))]


CONTROL_KEYS = frozenset({BLOCKED_BY, PENDING_APPROVAL, APPROVAL, PENDING_QUESTIONS, ANSWERS})


def render_control(msg: Message, *, show_name: bool = False) -> list[dict[str, Any]]:
    """A message with a control mark as Gradio chatbot messages."""
    extra = msg.extra or {}
    if msg.role == USER and APPROVAL in extra:
        return [chat_message("user", _decision_text(extra[APPROVAL], content_text(msg.content)))]
    if msg.role == USER and ANSWERS in extra:  # the answers to a tool's questions (the form under the chat)
        given = extra[ANSWERS] if isinstance(extra[ANSWERS], dict) else {}
        said = "; ".join(escape_markdown(str(v)[:200]) for v in given.values())
        return [chat_message("user", f"{icon('approved')} Answered: {said}")]
    if PENDING_QUESTIONS in extra:  # a tool asks the person something (chatagent.ask_user): the form below
        asked = " ".join(escape_markdown(str(q.get("question", ""))) for q in extra[PENDING_QUESTIONS] or ())
        return [chat_message("assistant", f"{icon('paused')} *The agent asks: {asked} Answer in the form below.*")]
    if BLOCKED_BY in extra:
        by = escape_html(safe_name(str(extra[BLOCKED_BY])))
        reason = extra.get(BLOCKED_REASON)
        note = f"{icon('blocked')} *Blocked by **{by}**" + (f": {escape_markdown(str(reason))}*" if reason else ".*")
        return [chat_message("assistant", f"{escape_markdown(msg.text)}\n\n{note}" if msg.text else note)]
    rest = {k: v for k, v in extra.items() if k != PENDING_APPROVAL}
    out = render_message(msg.copy(extra=rest or None), show_name=show_name)
    calls = [c for c in extra.get(PENDING_APPROVAL) or [] if isinstance(c, dict)]
    names = ", ".join(f"**{escape_html(safe_name(str(c.get('name', '?'))))}**" for c in calls)
    text = f"{icon('paused')} *Waiting for your approval to run {names}: Approve or Deny below.*"
    # what each call would do, in view: the call's own block above is folded, and a person decides on this
    shown = [_approval_arguments(c, len(calls) > 1) for c in calls]
    out.append(chat_message("assistant", "\n\n".join([text, *shown])))
    return out


#: how much of a call's arguments the approval prompt shows (the rest is in the call's folded block above it)
APPROVAL_SHOWN = 4000


def _approval_arguments(call: dict[str, Any], named: bool) -> str:
    arguments = _pretty_json(str(call.get("arguments") or "{}"))
    more = len(arguments) - APPROVAL_SHOWN
    shown = code_block(arguments[:APPROVAL_SHOWN] if more > 0 else arguments, "json")
    if more > 0:
        shown += f"\n\n*… {more:,} characters more, in the call's block above*"
    return f"**{escape_html(safe_name(str(call.get('name', '?'))))}**\n\n{shown}" if named else shown


def _decision_text(decision: Any, reason: str) -> str:
    if decision is True:
        text = f"{icon('approved')} Approved."
    elif decision is False:
        text = f"{icon('denied')} Denied."
    elif isinstance(decision, dict):
        yes = sum(1 for v in decision.values() if v)
        text = f"{icon('approved')} Approved {yes} of {len(decision)} calls."
    else:
        text = "Decision."
    return text + (f" {escape_markdown(reason)}" if reason else "")


def render_message(msg: Message, *, show_name: bool = False) -> list[dict[str, Any]]:
    """One chatagent message as zero or more Gradio chatbot messages (role, content, metadata).

    - user: text and attachments; assistant text: Markdown, with the speaker's name first if `show_name`;
    - reasoning_content: a collapsed "Thinking" block before the text;
    - a function call: a collapsed block with the arguments (while they stream, the arguments so far, growing); a
      function result: a collapsed block with it.
    """
    if msg.extra and not CONTROL_KEYS.isdisjoint(msg.extra):  # a plugin's block, a call waiting, a decision
        return render_control(msg, show_name=show_name)
    if msg.role == USER:
        return render_user(msg)
    if msg.role == FUNCTION:
        text = msg.text
        body = code_block(text) if text else "*(empty result)*"
        return [chat_message("assistant", body, f"{icon('result')} Result of {safe_name(msg.name or 'tool')}")]
    if msg.role != ASSISTANT:
        return []
    waiting_for = pending_input([msg])
    if waiting_for is not None:  # a group chat waits for a person's message
        who = escape_html(safe_name(waiting_for or "you"))
        return [chat_message("assistant", f"{icon('waiting')} *Waiting for **{who}**: type the next message.*")]
    out: list[dict[str, Any]] = []
    extra = msg.extra or {}
    passage = extra.get("passage")
    if passage:  # the best-matching passage, shown first; the answer is the small model's summary of it
        out.append(render_passage(passage))
    if msg.reasoning_content:
        out.append(chat_message("assistant", escape_markdown(msg.reasoning_content), THINKING_TITLE))
    text = msg.text
    if text:
        if show_name and msg.name:
            text = f"{speaker_badge(msg.name)} **{escape_html(safe_name(msg.name))}**\n\n{escape_markdown(text)}"
        else:
            text = escape_markdown(text)
        out.append(chat_message("assistant", f"{SUMMARY_LABEL}\n\n{text}" if passage else text))
    if msg.function_call is not None:
        call = msg.function_call
        who = f"{safe_name(msg.name)} → " if show_name and msg.name else ""
        out.append(
            chat_message(
                "assistant",
                code_block(_pretty_json(call.arguments), "json"),
                f"{icon('tool')} {who}{safe_name(call.name)}",
            )
        )
    streaming = extra.get(STREAMING_CALL)
    if msg.function_call is None and isinstance(streaming, dict):
        out.append(render_streaming_call(streaming, f"{safe_name(msg.name)} → " if show_name and msg.name else ""))
    note = {StopReason.LENGTH: CUT_NOTE, StopReason.REPETITION: LOOP_NOTE, StopReason.PROMPT_ECHO: ECHO_NOTE}.get(
        extra.get("stop_reason", "")
    )
    if note:
        out.append(chat_message("assistant", note))
    if extra.get("sources"):
        out.append(render_sources(extra["sources"]))
    parsed = extra.get("parsed")
    if isinstance(parsed, dict) and parsed:
        format_mark = extra.get("response_format")
        out.append(render_object(parsed, isinstance(format_mark, dict) and format_mark.get("valid") is True))
    return out


#: how much of a streaming call's arguments is shown: the end of them (what the model is writing now)
STREAMING_TAIL = 4000


def render_streaming_call(streaming: dict[str, Any], who: str = "") -> dict[str, Any]:
    """A tool call whose arguments are streaming: an open block titled with the tool, the arguments so far in it
    (their last STREAMING_TAIL characters, and how many came before)."""
    arguments = str(streaming.get("arguments") or "")
    before = len(arguments) - STREAMING_TAIL
    shown = code_block(arguments[before:] if before > 0 else arguments, "json")
    if before > 0:
        shown = f"*… {before:,} characters before*\n\n{shown}"
    name = safe_name(str(streaming.get("name") or "tool"))
    title = f"{icon('tool')} {who}{name} *(writing {len(arguments):,} characters…)*"
    return chat_message("assistant", shown, title, status="pending")


def render_object(parsed: dict, valid: bool) -> dict[str, Any]:
    """A structured answer's fields as a table under it: those parsed so far while it streams (marked as filling
    in), the validated object at the end."""
    rows = [f"| {_cell(str(k))} | {_cell(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))} |"
            for k, v in list(parsed.items())[:100]]  # fmt: skip
    head = f"**Fields** {icon('approved')}*(valid)*" if valid else "**Fields** *(filling in…)*"
    return chat_message("assistant", head + "\n\n| field | value |\n|---|---|\n" + "\n".join(rows))


def _cell(text: str) -> str:
    """`text` as one Markdown table cell: on one line, escaped, its pipes kept as text."""
    return escape_markdown(" ".join(text.split())[:500]).replace("|", "\\|") or " "


def render_passage(passage: dict[str, Any]) -> dict[str, Any]:
    """The passage an answer summarises, with its file and page, the sentences that match the question marked.

    It is an HTML block (`<blockquote>`, its lines joined by `<br>`, no blank line) with its text escaped, so no
    character of the document can start Markdown or a tag of its own."""
    text = str(passage.get("text", ""))
    marked: list[str] = []
    at = 0
    for start, end in sorted((int(a), int(b)) for a, b in passage.get("highlights") or []):
        if at <= start < end <= len(text):
            marked += [escape_html(text[at:start]), "<mark>", escape_html(text[start:end]), "</mark>"]
            at = end
    marked.append(escape_html(text[at:]))
    body = "<br>".join(line.strip() for line in "".join(marked).splitlines() if line.strip())
    label = escape_html(source_label(passage))
    return chat_message("assistant", f"{PASSAGE_TITLE} **{label}**\n\n<blockquote>{body}</blockquote>")


def render_sources(sources: list[dict]) -> dict[str, Any]:
    """The excerpts an answer came from, under it: a collapsed block titled with each file and page, the
    snippets inside."""
    pages: dict[str, list[int]] = {}  # file -> its pages, in the order they come
    for src in sources:
        listed = pages.setdefault(safe_name(str(src.get("file", "?"))), [])
        listed += [p for p in src.get("pages") or [] if p not in listed]
    label = "Sources: " + "; ".join(
        f"{name} {'p.' if len(ps) == 1 else 'pp.'} {', '.join(map(str, ps))}" if ps else name
        for name, ps in pages.items()
    )
    if len(label) > 300:
        label = label[:297] + "…"
    title = f"{icon('sources')} {label}"
    parts = []
    for n, src in enumerate(sources, 1):
        snippet = escape_markdown(" ".join(str(src.get("text", "")).split()))
        parts.append(f"**{n}. {escape_html(source_label(src))}**\n\n> {snippet}")
    return chat_message("assistant", "\n\n".join(parts), title)


def render_error(error: BaseException) -> dict[str, Any]:
    """An error as a readable chat message (its type and message, never a traceback)."""
    if isinstance(error, ModelServiceError):
        text = f"The model service failed ({error.code}): {error.public_message}"  # no server named: the log has it
    elif isinstance(error, RunDeadlineExceeded):
        text = "The answer took too long and was stopped."
    elif isinstance(error, SessionStoreError):  # it names the store's file or URL: for the log, not the page
        text = "The conversation could not be saved: the conversation store is unavailable (the log says why)."
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return chat_message("assistant", f"{icon('error')} **Error.** {escape_markdown(mask_secrets(text))}")


def render_conversation(messages: list[Message], *, show_names: bool = False) -> list[dict[str, Any]]:
    """A whole conversation (system messages left out)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        out.extend(render_message(m, show_name=show_names))
    return out
