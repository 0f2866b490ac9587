"""GroupChat: several agents (and people) in one conversation, taking turns.

    chat = GroupChat(agents=[alice, bob], selection='auto', llm=host_cfg, max_rounds=6)
    for response in chat.run([{'role': 'user', 'content': 'Debate: tabs or spaces?'}]):
        ...

**Seats.** Each speaker sees the conversation from its own seat: its own turns as assistant messages
(with its tool calls and results), everyone else's text as user messages prefixed `"Name: "`, and a
system message naming the participants. A reply that starts with the speaker's own `"Name: "` (models
imitate the others' prefix) has it removed. Other speakers' tool calls and results are not shown to it.
Every message of the response carries its speaker's `name` (a tool result keeps its tool's name, as
everywhere in chatagent).

**Who speaks.** An `@name` in the latest message makes that participant speak next, in every mode.
Otherwise `selection` decides: 'round_robin' (the participant after the last speaker), 'random'
(anyone but the last speaker; `seed=` for repeatable runs), 'auto' (the host model `llm` picks a name
from the participants' names and descriptions, or answers `[STOP]`; an answer naming nobody falls back
to round robin, logged), or 'manual' (only `run(..., speaker=name)` and `@name` choose; the run ends
when nobody is named). `run(..., speaker=name)` forces the first speaker in every mode.

**When it stops.** After `max_rounds` turns per `run()` call; when a turn contains one of
`termination_words`; when `is_termination(conversation)` returns True (called after each turn with the
whole conversation as Messages); when the host answers `[STOP]`; or when it is a person's turn.

**The human in the loop.** A participant that is a `UserAgent` (or any agent with `is_human = True`)
is never run: when its turn comes the group chat's response ends with a *pending-input marker*

    {'role': 'assistant', 'name': 'Alice', 'content': '<!-- INTERRUPT: PENDING_USER_INPUT -->',
     'extra': {'pending_user_input': 'Alice'}}

(`chatagent.agents.user.pending_input(response)` returns 'Alice', or None when the chat did not pause).
To resume, call `run()` again with the conversation so far plus the person's message:

    history += response                      # markers left in the history are ignored
    history.append({'role': 'user', 'name': 'Alice', 'content': 'I vote for tabs.'})
    response = chat.run_nonstream(history)

A user message without `name` is taken to be the first human participant's (or the outside user's
when there is none), so a UI may simply append `{'role': 'user', 'content': ...}`.

**Config form.** `agents` may also be a dict:

    {'background': 'A design review.',
     'agents': [{'name': 'Alice', 'description': 'architect', 'instructions': 'Be concise.',
                 'knowledge_files': ['spec.pdf'], 'tools': ['code_interpreter'], 'is_human': False},
                {'name': 'Me', 'description': 'the product owner', 'is_human': True}]}

A participant with `knowledge_files` becomes an `Assistant` (RAG), one with tools a `FnCallAgent`, one
with neither a `BasicAgent`, all on the group chat's `llm` unless the entry has its own `llm`.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.agents.router import run_subagent
from chatagent.agents.user import is_pending_input, pending_marker
from chatagent.llm.base import BaseChatModel, response_text
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, ContentItem, Message, content_text
from chatagent.stream import fragment
from chatagent.tokens import truncate_tokens

logger = logging.getLogger("chatagent.group_chat")

SELECTIONS = ("auto", "round_robin", "random", "manual")
STOP = "[STOP]"
HOST_TRANSCRIPT_MESSAGES = 30  # the host reads at most this many latest messages
HOST_MESSAGE_TOKENS = 400  # each shortened to about this many tokens

SEAT_PROMPT = {
    "en": (
        "You are {name}, taking part in a group chat.{background}\n"
        "The participants:\n{roster}\n"
        'Messages from the others appear as "Name: text". Write only your own reply, as {name}, '
        "without a name prefix. To ask someone in particular to answer, write @Name."
    ),
    "zh": (
        "你是{name}，正在参加一个群聊。{background}\n"
        "参与者：\n{roster}\n"
        "其他人的发言以“名字: 内容”的形式出现。请只以{name}的身份写出你自己的回复，不要加名字前缀。"
        "如需请某人回答，请写 @名字。"
    ),
}
HOST_SYSTEM = {
    "en": "You are the host of a group chat. You decide who speaks next; you never speak yourself.",
    "zh": "你是一个群聊的主持人。你决定下一位发言者，自己不发言。",
}
HOST_PROMPT = {
    "en": (
        "{background}Participants:\n{roster}\n\nConversation so far:\n{transcript}\n\n"
        "Who should speak next? Answer with exactly one name from: {names}. "
        "Answer [STOP] if the conversation has reached its goal or should end."
    ),
    "zh": (
        "{background}参与者：\n{roster}\n\n目前的对话：\n{transcript}\n\n"
        "下一位应该由谁发言？只回答一个名字，从以下名字中选：{names}。"
        "如果对话已达到目的或应当结束，回答 [STOP]。"
    ),
}
BACKGROUND = {"en": "\nBackground: {}", "zh": "\n背景：{}"}
HOST_BACKGROUND = {"en": "Background: {}\n\n", "zh": "背景：{}\n\n"}
EMPTY_TRANSCRIPT = {"en": "(nothing yet)", "zh": "（尚无发言）"}


class GroupChat(Agent):
    """Agents and people taking turns in one conversation (see the module docstring).

    Args:
        agents: the participants (each with a unique `name`), or a config dict (see the module docstring).
        selection: 'auto', 'round_robin', 'random' or 'manual'.
        max_rounds: at most this many turns per `run()` call.
        llm: the host model ('auto' selection) and the default model of participants built from a config.
        termination_words: a turn containing any of these (case-sensitive) ends the chat.
        is_termination: called with the whole conversation (Messages) after each turn; True ends the chat.
        background: what the chat is about, shown to every participant and the host.
        seed: seeds 'random' selection.
    """

    def __init__(
        self,
        agents: list[Agent] | dict,
        selection: str = "auto",
        max_rounds: int = 10,
        llm: dict | BaseChatModel | None = None,
        termination_words: list[str] | tuple[str, ...] = (),
        is_termination: Callable[[list[Message]], bool] | None = None,
        background: str | None = None,
        seed: int | None = None,
        name: str | None = "GroupChat",
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm=llm, name=name, description=description, **kwargs)
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {max_rounds}")
        if isinstance(agents, dict):
            background = background if background is not None else agents.get("background")
            agents = agents_from_config(agents, llm)
        self.agents: list[Agent] = list(agents)
        if not self.agents:
            raise ValueError("a group chat needs at least one participant")
        bad = next((a for a in self.agents if not isinstance(a, Agent)), None)
        if bad is not None:
            raise TypeError(f"group chat participants must be Agents, got {type(bad).__name__}")
        names = [a.name for a in self.agents]
        if any(not n for n in names):
            raise ValueError("every participant of a group chat needs a name")
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"two participants are called {dup!r}: names must be unique")
        self._by_name: dict[str, Agent] = {a.name: a for a in self.agents}  # type: ignore[misc]
        self._order: list[str] = names  # type: ignore[assignment]
        self.selection = selection
        self.max_rounds = max_rounds
        self.termination_words = tuple(termination_words)
        self.is_termination = is_termination
        self.background = background
        self._rng = random.Random(seed)
        self._first_human = next((a.name for a in self.agents if _is_human(a)), None)

    def _sub_agents(self) -> list[Agent]:
        return self.agents

    # ---- the loop --------------------------------------------------------------------------------------

    def _run(
        self, messages: list[Message], lang: str = "en", speaker: str | None = None, **kwargs: Any
    ) -> Iterator[list[Message]]:
        lang = lang if lang in SEAT_PROMPT else "en"
        history = [m for m in messages if not is_pending_input(m)]
        response: list[Message] = []
        if speaker is not None and speaker not in self._by_name:
            raise ValueError(f"speaker {speaker!r} is not in this group chat ({', '.join(self._order)})")
        nxt = speaker
        for _ in range(self.max_rounds):
            conversation = history + response
            if nxt is None:
                nxt = self._mentioned(conversation)
            if nxt is None:
                nxt = self._select(conversation, lang)
            if nxt is None:
                if self.selection == "manual" and not response:
                    raise ValueError("selection='manual': name the speaker with run(..., speaker=name) or @name")
                return
            agent = self._by_name[nxt]
            start = len(response)
            if _is_human(agent):
                yield [fragment(pending_marker(nxt), start)]
                return
            view = self._seat_view(nxt, conversation, lang)
            turn = yield from _without_own_name(run_subagent(agent, view, lang, start=start), nxt, start)
            response.extend(turn)
            if not turn:
                logger.warning("group chat: %s said nothing", nxt)
            nxt = None
            if self._terminated(turn, history + response):
                return

    def _terminated(self, turn: list[Message], conversation: list[Message]) -> bool:
        if self.termination_words:
            text = "\n".join(content_text(m.content) for m in turn if m.role == ASSISTANT)
            word = next((w for w in self.termination_words if w in text), None)
            if word is not None:
                logger.info("group chat: ended by the termination word %r", word)
                return True
        if self.is_termination is not None and self.is_termination(conversation):
            logger.info("group chat: ended by is_termination")
            return True
        return False

    # ---- choosing the next speaker ---------------------------------------------------------------------

    def _speaker_of(self, m: Message) -> str | None:
        if m.role == USER and m.name is None:
            return self._first_human
        return m.name if m.role in (USER, ASSISTANT) else None

    def _last_speaker(self, conversation: list[Message]) -> str | None:
        for m in reversed(conversation):
            who = self._speaker_of(m)
            if who in self._by_name:
                return who
        return None

    def _mentioned(self, conversation: list[Message]) -> str | None:
        """The participant @mentioned first in the latest turn (not the one who wrote it), or None."""
        last: str | None = None
        texts: list[str] = []
        for m in reversed(conversation):
            if m.role == FUNCTION or m.function_call is not None:
                continue
            who = self._speaker_of(m)
            if m.role == SYSTEM or (texts and who != last):
                break
            last = who
            texts.append(content_text(m.content))
        text = "\n".join(reversed(texts))
        if "@" not in text:
            return None
        return find_mention(text, [n for n in self._order if n != last])

    def _select(self, conversation: list[Message], lang: str) -> str | None:
        if self.selection == "round_robin":
            return self._round_robin(conversation)
        if self.selection == "random":
            last = self._last_speaker(conversation)
            choices = [n for n in self._order if n != last] or self._order
            return self._rng.choice(choices)
        if self.selection == "manual":
            return None
        return self._ask_host(conversation, lang)

    def _round_robin(self, conversation: list[Message]) -> str:
        last = self._last_speaker(conversation)
        if last is None:
            return self._order[0]
        return self._order[(self._order.index(last) + 1) % len(self._order)]

    def _ask_host(self, conversation: list[Message], lang: str) -> str | None:
        prompt = HOST_PROMPT[lang].format(
            background=HOST_BACKGROUND[lang].format(self.background) if self.background else "",
            roster=self._roster(),
            transcript=self._transcript(conversation, lang),
            names=", ".join(self._order),
        )
        msgs = [Message._make(SYSTEM, HOST_SYSTEM[lang]), Message._make(USER, prompt)]
        answer = response_text(_drain(self._call_llm(msgs)))
        choice = parse_host_answer(answer, self._order)
        if choice == STOP:
            logger.info("group chat: the host ended the chat")
            return None
        if choice is None:
            fallback = self._round_robin(conversation)
            logger.warning("group chat: the host answered %r, naming no participant; %s speaks next", answer, fallback)
            return fallback
        return choice

    # ---- what each participant sees --------------------------------------------------------------------

    def _roster(self) -> str:
        return "\n".join(f"- {a.name}: {a.description or ''}".rstrip(": ") for a in self.agents)

    def _transcript(self, conversation: list[Message], lang: str) -> str:
        lines = []
        for m in conversation[-HOST_TRANSCRIPT_MESSAGES:]:
            if m.role in (SYSTEM, FUNCTION) or m.function_call is not None:
                continue
            text = truncate_tokens(content_text(m.content).strip(), HOST_MESSAGE_TOKENS)
            who = self._speaker_of(m) or m.role
            lines.append(f"{who}: {text}")
        return "\n".join(lines) or EMPTY_TRANSCRIPT[lang]

    def _seat_view(self, name: str, conversation: list[Message], lang: str) -> list[Message]:
        """The conversation as `name` sees it (see the module docstring)."""
        background = BACKGROUND[lang].format(self.background) if self.background else ""
        system = SEAT_PROMPT[lang].format(name=name, background=background, roster=self._roster())
        view: list[Message] = []
        owner: str | None = None  # who made the latest function call, to place its results
        for m in conversation:
            role = m.role
            if role == SYSTEM:
                system += "\n\n" + content_text(m.content)
                continue
            if role == FUNCTION:
                if owner == name:
                    view.append(m)
                continue
            who = self._speaker_of(m)
            if role == ASSISTANT:
                owner = who
                if who == name:
                    view.append(m)
                    continue
                if m.function_call is not None:
                    continue
            view.append(_as_user(m, who))
        return [Message._make(SYSTEM, system)] + view


def _as_user(m: Message, who: str | None) -> Message:
    """Someone else's message as a user message prefixed with their name."""
    content = m.content
    if who:
        prefix = f"{who}: "
        if isinstance(content, str):
            content = prefix + content
        else:
            content = [ContentItem(text=prefix)] + list(content)
    return Message._make(USER, content, who, None, None, None)


def _name_prefix(text: str, name: str) -> int | None:
    """How much of `text` is the speaker's own name written before its reply ("Alice: ", "**Alice:** "):
    0 when there is none, None while `text` is too short to tell."""
    s = text.lstrip()
    undecided = False
    for p in (f"{name}:", f"{name}：", f"**{name}**:", f"**{name}:**", f"**{name}**："):
        if s.startswith(p):
            rest = s[len(p) :]
            return len(text) - len(rest) + (len(rest) - len(rest.lstrip()))
        undecided = undecided or p.startswith(s)
    return None if undecided else 0


def _without_own_name(stream: Iterator[list[Message]], name: str, index: int) -> Iterator[list[Message]]:
    """A participant's turn without the "Name: " some models put before their reply, imitating how the
    others' messages look to them. Only the start of the turn's first message is held back to decide."""
    held: str | None = ""  # None once decided
    strip = False  # after a removed prefix: drop whitespace until the reply's first character
    shown = False  # whether the turn's first message has been yielded
    try:
        while True:
            try:
                fragments = next(stream)
            except StopIteration as stop:
                turn: list[Message] = stop.value
                break
            out = []
            for f in fragments:
                if (
                    f.extra["index"] != index
                    or f.role != ASSISTANT
                    or f.function_call is not None
                    or not isinstance(f.content, str)
                ):
                    if held:  # the turn went on before the name could be told apart: show it as it was
                        out.append(fragment(Message._make(ASSISTANT, held, name), index))
                    held = None
                    out.append(f)
                    continue
                text = f.content
                if held is not None:
                    text = held + text
                    cut = _name_prefix(text, name)
                    if cut is None:
                        held = text
                        if f.reasoning_content:
                            out.append(f.copy(content=""))
                        continue
                    held, strip, text = None, cut > 0, text[cut:]
                if strip:
                    text = text.lstrip()
                    strip = not text
                if text or f.reasoning_content or f.function_call is not None:
                    out.append(f.copy(content=text))
            if out:
                shown = shown or any(f.extra["index"] == index for f in out)
                yield out
    finally:
        stream.close()  # type: ignore[attr-defined]
    if held or (turn and not shown):  # an empty reply is still a message of the response: yield it
        yield [fragment(Message._make(ASSISTANT, held or "", name), index)]
    first = turn[0] if turn else None
    if first is not None and first.role == ASSISTANT and isinstance(first.content, str):
        cut = _name_prefix(first.content, name)
        if cut:
            turn[0] = first.copy(content=first.content[cut:])
    return turn


def _drain(stream: Iterator[list[Message]]) -> list[Message]:
    """Run a `_call_llm` stream to its end without showing it; its return value (the reply)."""
    while True:
        try:
            next(stream)
        except StopIteration as stop:
            return stop.value


def _is_human(agent: Agent) -> bool:
    return bool(getattr(agent, "is_human", False))


def _add_usage(total: Any, part: Any) -> None:
    total.add(part.prompt_tokens, part.completion_tokens)
    total.calls += part.calls


def _bounded(name: str) -> str:
    """A regex for `name` that does not match inside a longer ASCII word."""
    pattern = re.escape(name)
    if name[:1].isascii() and (name[:1].isalnum() or name[:1] == "_"):
        pattern = r"(?<![A-Za-z0-9_])" + pattern
    if name[-1:].isascii() and (name[-1:].isalnum() or name[-1:] == "_"):
        pattern += r"(?![A-Za-z0-9_])"
    return pattern


def find_mention(text: str, names: list[str]) -> str | None:
    """The name in `names` that `text` @mentions first (longest name wins at the same place), or None."""
    best: tuple[int, int, str] | None = None
    for n in names:
        match = re.search("@" + _bounded(n), text, re.IGNORECASE)
        if match and (best is None or (match.start(), -len(n)) < best[:2]):
            best = (match.start(), -len(n), n)
    return best[2] if best else None


_HOST_STRIP = " \t\r\n*`'\"“”‘’「」『』[]()（）<>.,。，!！:："
_STOP_ANSWER = re.compile(r"^\W*stop\W*$", re.IGNORECASE)


def parse_host_answer(answer: str, names: list[str]) -> str | None:
    """The host's choice: a name from `names`, STOP, or None when the answer names nobody (or several)."""
    bare = answer.strip().strip(_HOST_STRIP)
    for n in names:
        if bare.lower() == n.lower():
            return n
    if _STOP_ANSWER.match(answer) or STOP.lower() in answer.lower():
        return STOP
    found = [n for n in names if re.search(_bounded(n), answer, re.IGNORECASE)]
    # a name found inside a longer one ("Bob" in "Bobby Tables") is not a second choice
    found = [n for n in found if not any(n != o and n.lower() in o.lower() for o in found)]
    return found[0] if len(found) == 1 else None


def agents_from_config(config: dict, llm: dict | BaseChatModel | None = None) -> list[Agent]:
    """Participants from the config form (see the module docstring)."""
    entries = config.get("agents")
    if not isinstance(entries, list) or not entries:
        raise ValueError("a group chat config needs 'agents': a non-empty list of participant dicts")
    out: list[Agent] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise ValueError(f"group chat config agents[{i}] must be a dict with a 'name'")
        out.append(_agent_from_entry(entry, llm))
    return out


def _agent_from_entry(entry: dict, llm: dict | BaseChatModel | None) -> Agent:
    name, description = entry["name"], entry.get("description")
    if entry.get("is_human"):
        from chatagent.agents.user import UserAgent

        return UserAgent(name=name, description=description)
    instructions = entry.get("instructions") or entry.get("system_message")
    tools = list(entry.get("tools") or entry.get("selected_tools") or [])
    files = list(entry.get("knowledge_files") or entry.get("files") or [])
    model = entry.get("llm", llm)
    common: dict[str, Any] = {"llm": model, "system_message": instructions, "name": name, "description": description}
    if files:
        try:
            from chatagent.agents.assistant import Assistant
        except ImportError as e:
            raise ValueError(
                f"group chat participant {name!r} has knowledge_files, which need chatagent's Assistant "
                f"(RAG), and it cannot be imported: {e}"
            ) from e
        return Assistant(function_list=tools, files=files, **common)
    if tools:
        from chatagent.agents.fncall import FnCallAgent

        return FnCallAgent(function_list=tools, **common)
    from chatagent.agents.basic import BasicAgent

    return BasicAgent(**common)
