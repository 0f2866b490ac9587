"""A loopback model that answers in whichever protocol it is asked in, for tests that port Qwen-Agent programs.

A port test scripts the model's *decisions*, not its text: "call my_image_gen with {'prompt': 'a dog'}",
"say 'Done.'", "hand over to Alice". The server renders each decision in the protocol of the request it
answers, so the same script serves chatagent and Qwen-Agent, whichever way each asks:

- native tools (the request has `tools`): `tool_calls`;
- nous prompts (`<tools>` in the prompt): `<tool_call>{...}</tool_call>` in the text;
- qwen prompts (`✿FUNCTION✿` in the prompt): `✿FUNCTION✿: name` / `✿ARGS✿: {...}`;
- ReAct (`Action Input:` in the prompt, `Observation:` a stop word): `Thought: ... Action: ... Action Input: ...`,
  and `Thought: ... Final Answer: ...` for an answer;
- everything else (a router's `Call: name`, a group chat host's choice, plain text) as written.

Decisions (plain dicts, so a port script can declare them without imports):

    {'say': 'text'}                              an answer
    {'call': [['name', {args}], ...], 'say': ''}  tool calls, after optional text
    {'think': 'reasoning', 'say': 'text'}        an answer with reasoning_content (native) or <think> text

`rules` answer requests that match them before the queue is consulted, whatever their number: a rule is
{'contains': [substrings of the request's messages], 'say': 'text'} (first match wins). Qwen-Agent's keyword
generation and document-QA members are answered this way, since the two frameworks make different numbers of
such calls. The server is strict, like a real one: a request with a body key no OpenAI-compatible server takes
(say, `thought_in_content` or `lang`) is answered 400, and is recorded in `rejected`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.loopback import Request
from tests.support.openai_server import OpenAIServer, Reply

# what an OpenAI-compatible server (OpenAI, vLLM, DashScope's compatible mode) takes in the body
ACCEPTED_KEYS = frozenset(
    {
        "model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "stop", "seed", "n", "presence_penalty", "frequency_penalty", "tools",
        "tool_choice", "parallel_tool_calls", "response_format", "logprobs", "top_logprobs", "user", "logit_bias",
        "top_k", "repetition_penalty", "chat_template_kwargs", "enable_thinking", "min_p",
    }
)  # fmt: skip


def protocol(body: dict) -> str:
    """'native', 'nous', 'qwen', 'react' or 'text': how the request asks the model to call tools."""
    if body.get("tools"):
        return "native"
    text = prompt_text(body)
    if "<tools>" in text:
        return "nous"
    if "✿FUNCTION✿" in text:
        return "qwen"
    stops = body.get("stop") or []
    if "Action Input" in text and any("Observation" in s for s in ([stops] if isinstance(stops, str) else stops)):
        return "react"
    return "text"


def prompt_text(body: dict) -> str:
    """All the text of the request's messages."""
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [p.get("text", "") for p in c if isinstance(p, dict)]
    return "\n".join(parts)


def render(decision: dict, body: dict) -> Reply:
    """`decision` as the reply to a request with `body`, in its protocol."""
    reply = _render(decision, body)
    reply.role_chunk = False  # Qwen-Agent's qwen prompt format fails on a first chunk without text
    return reply


def _render(decision: dict, body: dict) -> Reply:
    if decision.get("keywords"):
        return Reply(text=_keywords(body))
    how = protocol(body)
    say = decision.get("say", "")
    calls = [(name, args) for name, args in decision.get("call", [])]
    think = decision.get("think", "")
    if how == "native":
        return Reply(text=say, tool_calls=calls, reasoning=think)
    if how == "react":
        if calls:
            name, args = calls[0]
            return Reply(text=f"{think or 'I should use a tool.'}\nAction: {name}\nAction Input: {_json(args)}")
        return Reply(text=f"Thought: {think or 'I now know the final answer'}\nFinal Answer: {say}")
    thought = f"<think>{think}</think>" if think else ""
    if how == "nous":
        blocks = "".join(f'<tool_call>\n{{"name": "{n}", "arguments": {_json(a)}}}\n</tool_call>' for n, a in calls)
        return Reply(text=thought + say + ("\n" if say and blocks else "") + blocks)
    if how == "qwen":
        blocks = "".join(f"✿FUNCTION✿: {n}\n✿ARGS✿: {_json(a)}\n" for n, a in calls)
        return Reply(text=thought + say + ("\n" if say and blocks else "") + blocks)
    return Reply(text=say, reasoning=think)


def _json(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


class ProtocolServer(OpenAIServer):
    """OpenAIServer whose replies are decisions rendered per request (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.rules: list[dict] = []
        self.rejected: list[tuple[Request, str]] = []

    def script(self, *decisions: dict) -> ProtocolServer:
        """Queue decisions, one per model request (after the rules)."""
        return self.add(*[self._decide(d) for d in decisions])

    def reset(self) -> None:
        super().reset()
        self.rules = []
        self.rejected = []

    def _decide(self, decision: dict) -> Any:
        def reply(request: Request) -> Reply:
            return render(decision, request.json or {})

        reply.decision = decision  # type: ignore[attr-defined]
        return reply

    def _next_reply(self, request: Request, *, record: bool = False) -> Any:
        body = request.json if isinstance(request.json, dict) else {}
        unknown = sorted(set(body) - ACCEPTED_KEYS)
        if unknown:
            with self._lock:
                self.requests.append(request)
                self.rejected.append((request, ", ".join(unknown)))
            return Reply(status=400, error={"message": f"Unrecognized request argument supplied: {', '.join(unknown)}"})
        text = prompt_text(body)
        for rule in self.rules:
            if all(s in text for s in rule["contains"]):
                with self._lock:
                    self.requests.append(request)
                return render(rule, body)
        return super()._next_reply(request, record=record)

    # ---- rules for calls the two frameworks make in different numbers ------------------------------------

    def answer_keyword_generation(self) -> ProtocolServer:
        """Qwen-Agent asks the model for search keywords before retrieving: answer with the question's words."""
        self.rules.append({"contains": ["keywords_zh", "Keywords:"], "say": "", "keywords": True})
        return self

    def answer_members(self, needle: str, answer: str, no_answer: str = "<None>") -> ProtocolServer:
        """Document-QA members (one request per part of a document): the answer where the part holds `needle`."""
        self.rules.append({"contains": [no_answer, needle], "say": json.dumps({"res": "ans", "content": answer})})
        self.rules.append({"contains": [no_answer], "say": json.dumps({"res": "none", "content": no_answer})})
        return self


def _keywords(body: dict) -> str:
    question = re.findall(r"Question: (.*)", prompt_text(body))
    words = re.findall(r"\w+", question[-1]) if question else []
    return json.dumps({"keywords_zh": words, "keywords_en": words}, ensure_ascii=False)
