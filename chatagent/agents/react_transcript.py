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

from collections.abc import Iterator

from chatagent.schema import ASSISTANT, FUNCTION, Message, content_text
from chatagent.stream import INDEX

THOUGHT, ACTION, OBSERVATION, FINAL = "Thought: ", "\nAction: ", "\nObservation: ", "\nFinal Answer: "


def as_transcript(stream: Iterator[list[Message]]) -> Iterator[list[Message]]:
    """Fragments of a structured ReAct run -> fragments of one message (index 0) holding the transcript."""
    state = ""  # what was written last: '', 'thought', 'answer', 'observation'
    current = None  # the index of the structured message being written
    for fragments in stream:
        out: list[str] = []
        extra: dict = {}
        for f in fragments:
            i = f.extra[INDEX]
            if len(f.extra) > 1:
                extra.update((k, v) for k, v in f.extra.items() if k not in (INDEX, "function_id"))
            if f.role == FUNCTION:
                out.append(
                    OBSERVATION + content_text(f.content) if isinstance(f.content, list) else OBSERVATION + f.content
                )
                state, current = "observation", i
                continue
            if f.reasoning_content:
                if state != "thought" or current != i:
                    out.append(("\n" if state else "") + THOUGHT)
                out.append(f.reasoning_content)
                state, current = "thought", i
            if f.function_call is not None:
                out.append(f"{ACTION}{f.function_call.name}\nAction Input: {f.function_call.arguments}")
                state, current = "action", i
            text = f.content if isinstance(f.content, str) else content_text(f.content)
            if text:
                if state != "answer" or current != i:
                    out.append(FINAL if state else FINAL.lstrip("\n"))
                out.append(text)
                state, current = "answer", i
        if out or extra:
            yield [Message._make(ASSISTANT, "".join(out), None, None, None, {**extra, INDEX: 0})]
    if not state:
        yield [Message._make(ASSISTANT, "", None, None, None, {INDEX: 0})]


__all__ = ["as_transcript"]
