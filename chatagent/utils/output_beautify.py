"""Printing a streamed response in a terminal, as Qwen-Agent's `typewriter_print` does.

    text = ''
    for response in bot.run(messages):
        text = typewriter_print(response, text)

Each call prints only what is new since `text` (the value it returned last time) and returns the whole
response as text: thoughts after `[THINK]`, answers after `[ANSWER]`, calls as `[TOOL_CALL] name` and results
as `[TOOL_RESPONSE] name`. Messages may be dicts or Messages; user and system messages are skipped.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from chatagent.schema import ASSISTANT, FUNCTION, ContentItem, content_text

TOOL_CALL_S = "[TOOL_CALL]"
TOOL_RESULT_S = "[TOOL_RESPONSE]"
THOUGHT_S = "[THINK]"
ANSWER_S = "[ANSWER]"


def response_as_text(messages: list[Any]) -> str:
    """The response as the text `typewriter_print` shows."""
    parts = []
    for msg in messages:
        role = msg.get("role")
        if role == ASSISTANT:
            if msg.get("reasoning_content"):
                parts.append(f"{THOUGHT_S}\n{_text(msg['reasoning_content'])}")
            if msg.get("content"):
                parts.append(f"{ANSWER_S}\n{_text(msg['content'])}")
            call = msg.get("function_call")
            if call:
                parts.append(f"{TOOL_CALL_S} {call['name']}\n{call['arguments']}")
        elif role == FUNCTION:
            parts.append(f"{TOOL_RESULT_S} {msg.get('name')}\n{_text(msg.get('content'))}")
    return "\n".join(parts)


def typewriter_print(messages: list[Any], text: str = "") -> str:
    """Print what `messages` (a response so far) adds to `text` (what was printed before); return the whole."""
    full = response_as_text(messages)
    if full.startswith(text):
        new = full[len(text) :]
    else:  # the response changed in the middle (a stream that restarted): print it again on a new line
        new = "\n" + full
    if new:
        sys.stdout.write(new)
        sys.stdout.flush()
    return full


def multimodal_typewriter_print(messages: list[Any], text: str = "") -> str:
    """`typewriter_print`, and in a Jupyter notebook the images of tool results are shown under the text
    (elsewhere their paths are printed). Nothing is downloaded: a URL is handed to the notebook as a URL."""
    full = typewriter_print(messages, text)
    if len(full) > len(text):
        for image in _new_images(messages, text):
            _show_image(image)
    return full


def _new_images(messages: list[Any], printed: str) -> list[str]:
    """The images of the function results whose text goes past what was `printed` before."""
    images, end = [], -1
    for msg in messages:
        part = response_as_text([msg])
        if not part:
            continue
        end += len(part) + 1  # parts are joined by newlines
        content = msg.get("content")
        if msg.get("role") == FUNCTION and end > len(printed) and isinstance(content, list):
            images += [item.get("image") for item in content if item.get("image")]
    return images


def _show_image(image: str) -> None:
    ipython = sys.modules.get("IPython")  # only inside a running IPython / Jupyter: never imported by us
    if ipython is not None and ipython.get_ipython() is not None:
        display = importlib.import_module("IPython.display")
        shown = display.Image(url=image) if image.startswith(("http://", "https://")) else display.Image(filename=image)
        display.display(shown)
    else:
        sys.stdout.write(f"\n[image: {image}]\n")
        sys.stdout.flush()


def _text(content: Any) -> str:
    if isinstance(content, str) or content is None:
        return content or ""
    return content_text([_item(i) for i in content])


def _item(item: Any) -> Any:
    return item if isinstance(item, ContentItem) else ContentItem(**item)


__all__ = ["multimodal_typewriter_print", "response_as_text", "typewriter_print"]
