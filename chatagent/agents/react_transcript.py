"""ReActChat's response as one text, the way Qwen-Agent's ReActChat gives it (`ReActChat(transcript=True)`).

chatagent's ReActChat answers in structured messages: thoughts as `reasoning_content`, each action as a
function call and its result as a function message, the final answer as `content`. A transcript is one
assistant message whose text is all of it in ReAct form:

    Thought: I should look up the population.
    Action: population
    Action Input: {"city": "Paris"}
    Observation: 2.1 million
    Thought: I now know the final answer
    Final Answer: About 2.1 million people.

It is built from the structured stream as it comes (text only ever grows), so it streams the same way.
"""

from __future__ import annotations

from typing import Any

from chatagent.schema import ASSISTANT, FUNCTION, content_text
from chatagent.schema.fragment import Fragment

THOUGHT, ACTION, OBSERVATION, FINAL = "Thought: ", "\nAction: ", "\nObservation: ", "\nFinal Answer: "


class Transcript:
    """Maps the fragments of a structured ReAct run to fragments of one message (index 0) holding the transcript.

    Apply it to everything the run shows (`chatagent.agent.map_fragments`), then yield `finish()`."""

    def __init__(self) -> None:
        self.state = ""  # what was written last: '', 'thought', 'answer', 'observation'
        self.current: int | None = None  # the index of the structured message being written

    def __call__(self, fragments: list[Fragment]) -> list[Fragment]:
        out: list[str] = []
        extra: dict[str, Any] = {}
        for f in fragments:
            i = f.index
            if f.extra:
                extra.update((k, v) for k, v in f.extra.items() if k != "function_id")
            if f.role == FUNCTION:
                text = content_text(f.content) if isinstance(f.content, list) else f.content
                out.append(OBSERVATION + text)
                self.state, self.current = "observation", i
                continue
            if f.reasoning_content:
                if self.state != "thought" or self.current != i:
                    out.append(("\n" if self.state else "") + THOUGHT)
                out.append(f.reasoning_content)
                self.state, self.current = "thought", i
            if f.function_call is not None:
                out.append(f"{ACTION}{f.function_call.name}\nAction Input: {f.function_call.arguments}")
                self.state, self.current = "action", i
            text = f.content if isinstance(f.content, str) else content_text(f.content)
            if text:
                if self.state != "answer" or self.current != i:
                    out.append(FINAL if self.state else FINAL.lstrip("\n"))
                out.append(text)
                self.state, self.current = "answer", i
        if out or extra:
            return [Fragment.unchecked(ASSISTANT, "".join(out), None, None, None, extra or None, 0)]
        return []

    def finish(self) -> list[Fragment] | None:
        """After the run: an empty message if nothing was written at all."""
        return None if self.state else [Fragment.unchecked(ASSISTANT, "", index=0)]


__all__ = ["Transcript"]
