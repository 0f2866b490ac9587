"""What the page tells the user besides the chat: which model answers, and what a run is doing right now.

Pure functions over chatagent objects (no Gradio import). Text that comes from configuration (model names,
URLs, file names) is escaped like everything else on the page.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from chatagent.gui.icons import icon
from chatagent.gui.render import chat_message, escape_markdown

KEY_HINT = (
    "For better answers set `DASHSCOPE_API_KEY` (Qwen on DashScope), or `OPENAI_API_KEY` with "
    "`OPENAI_BASE_URL` and `OPENAI_MODEL` (any OpenAI-compatible server), and start again."
)


def model_label(llm: Any) -> str:
    """A short name for the model and where it runs: 'SmolLM2-135M-Instruct (embedded)', 'qwen-plus (DashScope)'."""
    name = os.path.basename(str(getattr(llm, "model", "") or "")) or type(llm).__name__
    name = name.removesuffix(".gguf")
    if name.endswith((".Q4_1", ".Q4_0", ".Q8_0", ".Q4_K_M", ".Q5_K_M", ".F16")):
        name = name.rsplit(".", 1)[0]
    kind = getattr(llm, "model_type", "")
    if kind == "local":
        return f"{name} (embedded, on this computer)"
    if kind == "dashscope":
        return f"{name} (DashScope)"
    base_url = getattr(llm, "base_url", None)
    if kind == "oai":
        return f"{name} ({urlsplit(base_url).netloc or base_url if base_url else 'api.openai.com'})"
    return f"{name} ({kind})" if kind else name


def model_note(llms: list[Any]) -> str:
    """Markdown for the top of the page: which model answers; for the embedded one, that it is small and how
    to use a better one."""
    labels = list(dict.fromkeys(escape_markdown(model_label(m)) for m in llms))
    if not labels:
        return ""
    note = f"**Model:** {', '.join(labels)}."
    if any(getattr(m, "model_type", "") == "local" and getattr(m, "default_weights", False) for m in llms):
        note += (
            " This is the embedded model: a very small one (135M parameters) that runs without a key or a "
            "network. Its answers are short and often wrong; check them against the sources shown. " + KEY_HINT
        )
    return note


def status_text(event: Any, label: str) -> str | None:
    """What a run is doing, from one of its events (see chatagent.events); None for events that say nothing new."""
    kind = event.kind
    if kind == "progress":
        return str(event.data.get("text") or "")
    if kind == "llm_start":
        return f"Waiting for the model ({label})"
    if kind == "tool_start":
        return f"Running the tool {event.tool}"
    return None


def status_message(text: str) -> dict[str, Any]:
    """The chat line that shows a status while the answer has not started."""
    return chat_message("assistant", f"{icon('waiting')} *{escape_markdown(text)}…*")
