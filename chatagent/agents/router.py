"""Router: answers a request itself or hands it to the sub-agent best suited for it.

    router = Router(llm=cfg, agents=[coder, translator])
    response = router.run_nonstream([{'role': 'user', 'content': 'Translate "hello" into French'}])

The router's model sees the sub-agents' names and descriptions and either answers the user directly or
writes a first line `Call: <name>`. A call is never shown: the text is held back until the first line
is complete and is not a call (`**Call:** name` and extra spaces are understood; the name is matched
exactly, then ignoring case). The chosen agent then runs on the original conversation (the caller's
messages, without the router's own system message) and its messages, carrying its name, are the
response. A name that matches no agent is logged and the router answers the user itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent, run_subagent
from chatagent.agents.hub import MultiAgentHub
from chatagent.llm.base import BaseChatModel
from chatagent.run.approval import paused_agent
from chatagent.run.requests import View
from chatagent.schema import ASSISTANT, Message, with_system_text
from chatagent.schema.fragment import Fragment, fragment
from chatagent.utils.logs import quote

logger = logging.getLogger("chatagent.router")

ROUTER_PROMPT = {
    "en": (
        "You can hand the user's request to one of these agents:\n{roster}\n\n"
        "If one of them is better suited to the request, reply with only one line: Call: <agent name>\n"
        "Otherwise answer the user directly yourself (do not start your answer with 'Call:')."
    ),
    "zh": (
        "你可以把用户的请求交给以下智能体之一：\n{roster}\n\n"
        "如果其中某个智能体更适合处理这个请求，只回复一行：Call: <智能体名字>\n"
        "否则请你自己直接回答用户（回答不要以“Call:”开头）。"
    ),
}
UNKNOWN_AGENT = {
    "en": "There is no agent called {name!r}. Answer the user directly yourself; do not write 'Call:'.",
    "zh": "没有名为“{name}”的智能体。请你自己直接回答用户，不要写“Call:”。",
}

# "Call: name", "**Call:** name", "call：name" at the very start of the reply
_CALL = re.compile(r"^\s*[*_]*\s*call\s*[*_]*\s*[:：]\s*[*_`\"']*\s*(?P<name>.*?)\s*[*_`\"'.。]*\s*$", re.IGNORECASE)
_CALL_WORD = "call"


class Router(Agent, MultiAgentHub):
    """Answers itself or delegates to one of `agents` by name (see the module docstring).

    Args:
        agents: the sub-agents, each with a unique `name` and ideally a `description`.
        llm: the router's own model.
        system_message: the router's instructions (its sub-agents never see them).
    """

    _agent_noun = "sub-agent"

    def __init__(
        self,
        agents: list[Agent],
        llm: dict[str, Any] | BaseChatModel | None = None,
        system_message: str | None = None,
        name: str | None = "Router",
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("function_list"):
            raise TypeError("Router() does not take function_list: it answers or hands over; give tools to a sub-agent")
        super().__init__(llm=llm, system_message=system_message, name=name, description=description, **kwargs)
        self.agents = list(agents)  # checked: Agents with unique names
        self._by_name: dict[str, Agent] = dict(zip(self.agent_names, self._agents, strict=True))

    async_safe = True
    fragment_native = True

    def _sub_agents(self) -> list[Agent]:
        return self.agents

    def _with_system_message(self, msgs: list[Message]) -> list[Message]:
        return msgs  # the router's instructions go to its own model only (see _router_messages)

    def _router_messages(self, messages: list[Message], lang: str) -> list[Message]:
        roster = "\n".join(f"- {a.name}: {a.description or ''}".rstrip(": ") for a in self.agents)
        prompt = ROUTER_PROMPT[lang].format(roster=roster)
        if self.system_message:
            prompt = self.system_message + "\n\n" + prompt
        return with_system_text(messages, prompt, first=True)

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        lang = lang if lang in ROUTER_PROMPT else "en"
        paused = paused_agent(messages)
        if paused is not None and (agent := self.match(paused)) is not None:  # a sub-agent's call awaited approval
            yield from self._subagent(agent, messages, lang)
            return
        routed = self._router_messages(messages, lang)
        detector = _CallDetector()
        yield from self._call_llm(routed, view=detector)
        tail = detector.finish()
        if tail:
            yield tail
        name, shown = detector.name, detector.shown
        if name is None:
            return
        agent = self.match(name)
        if agent is None:
            logger.warning("router: the model called unknown agent %s; answering itself", quote(name))
            retry = routed + [
                Message.unchecked(ASSISTANT, f"Call: {name}"),
                Message.unchecked("user", UNKNOWN_AGENT[lang].format(name=name)),
            ]
            yield from self._call_llm(retry, start=shown)
            return
        logger.info("router: handing the request to %s", agent.name)
        yield from self._subagent(agent, messages, lang, start=shown)

    def match(self, name: str) -> Agent | None:
        """The sub-agent called `name` (exactly, else ignoring case), or None."""
        if name in self._by_name:
            return self._by_name[name]
        lowered = name.lower()
        return next((a for n, a in self._by_name.items() if n.lower() == lowered), None)


class _CallDetector(View):
    """Shows the router model's own answer as it streams, holding back its first line until it is known not to
    be `Call: name`; a call ends the stream unseen (`name` is then the called agent)."""

    def __init__(self) -> None:
        self.held = ""  # text held back while it may still become "Call: name"
        self.deciding = True
        self.shown = 0  # 1 when a thinking model's reasoning was shown while deciding
        self.name: str | None = None

    def __call__(self, fragments: list[Fragment]) -> list[Fragment]:
        if not self.deciding:
            return fragments
        out: list[Fragment] = []
        for f in fragments:
            if not self.deciding or f.index != 0 or not isinstance(f.content, str):
                out.append(f)
                continue
            self.held += f.content
            verdict = _first_line_verdict(self.held)
            if verdict is None:  # still undecided: hold back the text, keep other fields
                if f.reasoning_content:
                    out.append(f.copy(content=""))
                    self.shown = 1
                continue
            if verdict is True:
                line = self.held.lstrip().split("\n", 1)[0]
                match = _CALL.match(line)
                assert match is not None  # the verdict says this line is a call
                self.name = match.group("name")
                self.deciding, self.done = False, True
                return [f for f in out if f.index != 0]
            self.deciding = False
            out.append(f.copy(content=self.held))
        return out

    def finish(self) -> list[Message] | None:
        """After the stream: the held-back text if the reply was short and not a call."""
        if not self.deciding:
            return None
        self.deciding = False
        match = _CALL.match(self.held)
        if match and match.group("name"):
            self.name = match.group("name")
            return None
        return [fragment(Message.unchecked(ASSISTANT, self.held), 0)] if self.held else None


def _first_line_verdict(text: str) -> bool | None:
    """True: the reply starts with a complete `Call: name` line; False: it cannot be a call; None: not yet known."""
    head = text.lstrip()
    if not head:
        return None
    bare = head.lstrip("*_ ").lower()
    if bare and not (bare.startswith(_CALL_WORD) or _CALL_WORD.startswith(bare)):
        return False
    newline = head.find("\n")
    if newline < 0:
        return None if len(head) < 200 else False
    match = _CALL.match(head[:newline])
    return bool(match and match.group("name"))


__all__ = ["Router", "run_subagent"]  # run_subagent: from chatagent.agent, for older imports
