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

from chatagent.agent import Agent, hidden
from chatagent.agents.basic import BasicAgent
from chatagent.agents.fncall import FnCallAgent
from chatagent.agents.group_chat_auto_router import (
    STOP,
    GroupChatAutoRouter,
    bounded,
    final_text,
    parse_host_answer,
    roster,
)
from chatagent.agents.hub import MultiAgentHub
from chatagent.agents.user import UserAgent, is_pending_input, pending_marker
from chatagent.llm.base import BaseChatModel
from chatagent.run.approval import paused_agent, pending_approval
from chatagent.run.interrupts import PENDING_QUESTIONS, is_answer, is_decision
from chatagent.schema import ASSISTANT, FUNCTION, SYSTEM, USER, ContentItem, Message, content_text
from chatagent.schema.fragment import Fragment, fragment
from chatagent.utils.logs import quote

logger = logging.getLogger("chatagent.group_chat")

SELECTIONS = ("auto", "round_robin", "random", "manual")

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
BACKGROUND = {"en": "\nBackground: {}", "zh": "\n背景：{}"}


class GroupChat(Agent, MultiAgentHub):
    """Agents and people taking turns in one conversation (see the module docstring).

    Args:
        agents: the participants (each with a unique `name`), or a config dict (see the module docstring).
        selection: 'auto', 'round_robin', 'random' or 'manual' (`agent_selection_method`, Qwen-Agent's
            name, is accepted too).
        max_rounds: at most this many turns per `run()` call (default 3; `run(..., max_round=n)` for one run).
        llm: the host model ('auto' selection) and the default model of participants built from a config.
        termination_words: a turn containing any of these (case-sensitive) ends the chat.
        is_termination: called with the whole conversation (Messages) after each turn; True ends the chat.
        background: what the chat is about, shown to every participant and the host.
        seed: seeds 'random' selection.
        function_list: tools for the host ('auto' selection only), see GroupChatAutoRouter.
    """

    _agent_noun = "participant"

    def __init__(
        self,
        agents: list[Agent] | dict[str, Any],
        selection: str | None = None,
        max_rounds: int = 3,
        llm: dict[str, Any] | BaseChatModel | None = None,
        termination_words: list[str] | tuple[str, ...] = (),
        is_termination: Callable[[list[Message]], bool] | None = None,
        background: str | None = None,
        seed: int | None = None,
        name: str | None = "GroupChat",
        description: str | None = None,
        *,
        agent_selection_method: str | None = None,
        function_list: list | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm=llm, name=name, description=description, **kwargs)
        if selection is not None and agent_selection_method is not None and selection != agent_selection_method:
            raise ValueError(f"selection={selection!r} and agent_selection_method={agent_selection_method!r} differ")
        selection = selection or agent_selection_method or "auto"
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
        _check_rounds(max_rounds, "max_rounds")
        if function_list and selection != "auto":
            raise ValueError(f"function_list gives the host tools; with selection={selection!r} there is no host")
        if isinstance(agents, dict):
            background = background if background is not None else agents.get("background")
            agents = agents_from_config(agents, llm)
        self.agents = list(agents)  # checked: Agents with unique names
        self._by_name: dict[str, Agent] = dict(zip(self.agent_names, self._agents, strict=True))
        self._order: list[str] = list(self._by_name)
        self.selection = selection
        self.max_rounds = max_rounds
        self.termination_words = tuple(termination_words)
        self.is_termination = is_termination
        self.background = background
        self._rng = random.Random(seed)
        self._first_human = next((a.name for a in self.agents if _is_human(a)), None)
        self.host: GroupChatAutoRouter | None = None
        if selection == "auto":
            self.host = GroupChatAutoRouter(function_list, llm, self.agents, "host", background=background)

    def _sub_agents(self) -> list[Agent]:
        return self.agents

    # ---- the loop --------------------------------------------------------------------------------------

    async_safe = True
    fragment_native = True

    def _run(
        self,
        messages: list[Message],
        lang: str = "en",
        speaker: str | None = None,
        max_round: int | None = None,
        need_batch_response: bool = True,
        mentioned_agents_name: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[list[Message]]:
        """One run: up to `max_round` turns (default `max_rounds`), one turn when `need_batch_response` is
        False; `speaker` speaks first, then the participants in `mentioned_agents_name`, in order."""
        lang = lang if lang in SEAT_PROMPT else "en"
        history = [m for m in messages if not is_pending_input(m)]
        response: list[Message] = []
        forced = ([speaker] if speaker is not None else []) + list(mentioned_agents_name or ())
        unknown = next((n for n in forced if n not in self._by_name), None)
        if unknown is not None:
            raise ValueError(f"speaker {unknown!r} is not in this group chat ({', '.join(self._order)})")
        rounds = self.max_rounds if max_round is None else _check_rounds(max_round, "max_round")
        paused = paused_agent(history) or _asking(history)
        if paused in self._by_name:  # a member's tool call waited for approval or asked a person: it resumes first
            forced.insert(0, paused)
        if not need_batch_response:
            rounds = 1
        for _ in range(rounds):
            conversation = history + response
            nxt = forced.pop(0) if forced else self._mentioned(conversation)
            if nxt is None and self.selection == "auto":
                nxt = yield from self._ask_host(conversation, lang)
            elif nxt is None:
                nxt = self._select(conversation)
            if nxt is None:
                if self.selection == "manual" and not response:
                    raise ValueError("selection='manual': name the speaker with run(..., speaker=name) or @name")
                return
            agent = self._by_name[nxt]
            start = len(response)
            if _is_human(agent):
                yield [fragment(pending_marker(nxt), start)]
                return
            seat = self._seat_view(nxt, conversation, lang)
            stripper = _OwnNameStripper(nxt, start)
            turn = yield from self._subagent(agent, seat, lang, start=start, view=stripper)
            tail = stripper.finish(turn)
            if tail:
                yield [*tail]
            response.extend(turn)
            if not turn:
                logger.warning("group chat: %s said nothing", nxt)
            if pending_approval(turn) or (turn and _asks(turn[-1])) or self._terminated(turn, history + response):
                return  # paused for a person to decide or answer, or ended
                return

    def _terminated(self, turn: list[Message], conversation: list[Message]) -> bool:
        if self.termination_words:
            text = "\n".join(content_text(m.content) for m in turn if m.role == ASSISTANT)
            word = next((w for w in self.termination_words if w in text), None)
            if word is not None:
                logger.info("group chat: ended by the termination word %s", quote(word))
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

    def _select(self, conversation: list[Message]) -> str | None:
        """The next speaker by round robin or at random; None for manual selection ('auto' asks the host)."""
        if self.selection == "round_robin":
            return self._round_robin(conversation)
        if self.selection == "random":
            last = self._last_speaker(conversation)
            choices = [n for n in self._order if n != last] or self._order
            return self._rng.choice(choices)
        return None

    def _round_robin(self, conversation: list[Message]) -> str:
        last = self._last_speaker(conversation)
        if last is None:
            return self._order[0]
        return self._order[(self._order.index(last) + 1) % len(self._order)]

    def _ask_host(self, conversation: list[Message], lang: str) -> Iterator[list[Message]]:
        """The host's choice (its turn is not shown): a name, or None when it ends the chat."""
        assert self.host is not None
        named = [m if m.name or m.role == SYSTEM else m.copy(name=self._speaker_of(m) or m.role) for m in conversation]
        answer = final_text((yield from self._subagent(self.host, named, lang, view=hidden)))
        choice = parse_host_answer(answer, self._order)
        if choice == STOP:
            logger.info("group chat: the host ended the chat")
            return None
        if choice is None:
            fallback = self._round_robin(conversation)
            logger.warning(
                "group chat: the host answered %s, naming no participant; %s speaks next", quote(answer), fallback
            )
            return fallback
        return choice

    # ---- what each participant sees --------------------------------------------------------------------

    def _roster(self) -> str:
        return roster(self.agents)

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
            if is_decision(m):  # a person's decision on a paused call, or answers: for the member who made it
                if owner == name:
                    view.append(m)
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
        return [Message.unchecked(SYSTEM, system)] + view


def _as_user(m: Message, who: str | None) -> Message:
    """Someone else's message as a user message prefixed with their name."""
    content = m.content
    if who:
        prefix = f"{who}: "
        if isinstance(content, str):
            content = prefix + content
        else:
            content = [ContentItem(text=prefix)] + list(content)
    return Message.unchecked(USER, content, who, None, None, None)


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


class _OwnNameStripper:
    """A participant's turn without the "Name: " some models put before their reply, imitating how the
    others' messages look to them. Only the start of the turn's first message is held back to decide."""

    def __init__(self, name: str, index: int) -> None:
        self.name, self.index = name, index
        self.held: str | None = ""  # None once decided
        self.strip = False  # after a removed prefix: drop whitespace until the reply's first character
        self.shown = False  # whether the turn's first message has been shown

    def __call__(self, fragments: list[Fragment]) -> list[Fragment]:
        name, index = self.name, self.index
        out: list[Fragment] = []
        for f in fragments:
            if f.index != index or f.role != ASSISTANT or f.function_call is not None or not isinstance(f.content, str):
                if self.held:  # the turn went on before the name could be told apart: show it as it was
                    out.append(fragment(Message.unchecked(ASSISTANT, self.held, name), index))
                self.held = None
                out.append(f)
                continue
            text = f.content
            if self.held is not None:
                text = self.held + text
                cut = _name_prefix(text, name)
                if cut is None:
                    self.held = text
                    if f.reasoning_content:
                        out.append(f.copy(content=""))
                    continue
                self.held, self.strip, text = None, cut > 0, text[cut:]
            if self.strip:
                text = text.lstrip()
                self.strip = not text
            if text or f.reasoning_content or f.function_call is not None or f.extra:  # extra: a mark
                out.append(f.copy(content=text))
        if out:
            self.shown = self.shown or any(f.index == index for f in out)
        return out

    def finish(self, turn: list[Message]) -> list[Fragment] | None:
        """After the turn: what is still held back (an empty reply is still a message of the response), and
        `turn` (what the participant said) without the prefix."""
        tail = None
        if self.held or (turn and not self.shown):
            tail = [fragment(Message.unchecked(ASSISTANT, self.held or "", self.name), self.index)]
        first = turn[0] if turn else None
        if first is not None and first.role == ASSISTANT and isinstance(first.content, str):
            cut = _name_prefix(first.content, self.name)
            if cut:
                turn[0] = first.copy(content=first.content[cut:])
        return tail


def _asks(m: Message) -> bool:
    """Whether `m` is a member's pause for the questions its tools asked a person (`chatagent.ask_user`)."""
    return m.role == ASSISTANT and m.extra is not None and PENDING_QUESTIONS in m.extra


def _asking(messages: list[Message]) -> str | None:
    """The member to resume when `messages` end with its pause for questions, then the answers; else None."""
    if len(messages) < 2 or not is_answer(messages[-1]) or not _asks(messages[-2]):
        return None
    return messages[-2].name


def _check_rounds(n: int, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what} must be a positive integer, got {n!r}")
    return n


def _is_human(agent: Agent) -> bool:
    return bool(getattr(agent, "is_human", False))


def _add_usage(total: Any, part: Any) -> None:
    total.add(part.prompt_tokens, part.completion_tokens)
    total.calls += part.calls


def find_mention(text: str, names: list[str]) -> str | None:
    """The name in `names` that `text` @mentions first (longest name wins at the same place), or None."""
    best: tuple[int, int, str] | None = None
    for n in names:
        match = re.search("@" + bounded(n), text, re.IGNORECASE)
        if match and (best is None or (match.start(), -len(n)) < best[:2]):
            best = (match.start(), -len(n), n)
    return best[2] if best else None


def agents_from_config(config: dict[str, Any], llm: dict[str, Any] | BaseChatModel | None = None) -> list[Agent]:
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


def _agent_from_entry(entry: dict[str, Any], llm: dict[str, Any] | BaseChatModel | None) -> Agent:
    name, description = entry["name"], entry.get("description")
    if entry.get("is_human"):
        return UserAgent(name=name, description=description)
    instructions = entry.get("instructions") or entry.get("system_message")
    tools = list(entry.get("tools") or entry.get("selected_tools") or [])
    files = list(entry.get("knowledge_files") or entry.get("files") or [])
    model = entry.get("llm", llm)
    common: dict[str, Any] = {"llm": model, "system_message": instructions, "name": name, "description": description}
    if files:
        try:
            from chatagent.agents.assistant import Assistant  # RAG: needs the rag extra
        except ImportError as e:
            raise ValueError(
                f"group chat participant {name!r} has knowledge_files, which need chatagent's Assistant "
                f"(RAG), and it cannot be imported: {e}"
            ) from e
        return Assistant(function_list=tools, files=files, **common)
    if tools:
        return FnCallAgent(function_list=tools, **common)
    return BasicAgent(**common)
