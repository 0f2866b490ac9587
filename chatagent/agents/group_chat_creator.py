"""GroupChatCreator: designs a group chat with the user: its background and its participants' configs.

    creator = GroupChatCreator(llm=cfg)
    response = creator.run_nonstream([{'role': 'user', 'content': 'A debate club: a pro, a con and a judge.'}])
    config = {'background': ..., 'agents': [json.loads(m['content']) for m in response if m['name'] == 'role_config']}
    chat = GroupChat(config, llm=cfg)

The model writes `<Background>: ...`, one `<Config>: {...}` per participant (name, description,
instructions) and `<Answer>: ...` (its question to the user). The response has a message per part: the
background (name 'background'), each config (name 'role_config', its content the JSON; a config that is not
valid JSON is left out, logged), and the answer (the creator's name). Background and answer stream as they
are written; a config appears once it is complete. Keep talking (append the response and the user's next
message) to refine the design: earlier parts are shown to the model in its own format. A reply with none of
the markers is all answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from chatagent.agent import Agent
from chatagent.run.requests import View
from chatagent.schema import ASSISTANT, Message
from chatagent.schema.fragment import fragment
from chatagent.tools.arguments import ToolArgumentError, parse_json

logger = logging.getLogger("chatagent.agent")

BACKGROUND, CONFIG, ANSWER = "<Background>: ", "<Config>: ", "<Answer>: "
MARKERS = {BACKGROUND: "background", CONFIG: "role_config", ANSWER: "answer"}
CONFIG_SCHEMA = {
    "name": "... # the role's name, a few words",
    "description": "... # who they are, one short sentence",
    "instructions": "... # what they do and how, about 30 words, addressing the role as 'you'",
}
CONFIG_EXAMPLE = {
    "name": "Travel writer",
    "description": "Writes vivid travel stories",
    "instructions": "You are a travel writer. You tell stories of places with concrete detail and a warm tone.",
}
CREATOR_PROMPT = {
    "en": """You help the user create a group chat. From the topic they give, create n fitting roles that will talk \
in one chat room, and talk with the user to settle what they want of those roles.

A role's config is JSON:
{schema}

A good config:
{example}

Always answer in exactly this format, first the background of the chat, then every role's config, then your reply, \
and nothing else:
{background}... # the background of the chat: the roles' relations, the story so far
{config}... # the first role's config, exactly the JSON above, never empty; name and description not empty; \
instructions more specific than the description (keep the user's own instructions whole), addressing the role as "you"
{config}... # the second role's config, likewise
...
{config}... # the n-th role's config; n is 3 unless the user says otherwise; every role's name is different
{answer}... # what you say to the user, asking what they want of the roles; never empty, not repeating questions

If the background or a role needs no change, you may leave out its {background_token} or {config_token} line and write \
only {answer_token} and the configs that change.""",
    "zh": """你扮演创建群聊的助手，请根据用户输入的聊天主题，创建n个合适的虚拟角色，这些角色将在一个聊天室内对话；你需要和用户\
对话，明确用户对这些角色的要求。

配置文件为json格式：
{schema}

一个优秀的配置样例如下：
{example}

在接下来的对话中，请在回答时严格使用如下格式，先生成群聊背景，然后依次生成所有角色的配置文件，最后再作出回复，除此之外不要回复其他任何内容：
{background}... # 生成的群聊背景，包括人物关系、预设故事背景等信息。
{config}... # 生成的第一个角色的配置文件，严格按照以上json格式，禁止为空。保证name和description不为空。instructions内容比\
description具体，如果用户给出了详细指令，请完全保留，用第二人称描述角色。
{config}... # 生成的第二个角色的配置文件，要求同上。
...
{config}... # 生成的第n个角色的配置文件，要求同上；如果用户没有明确指出n的数量，则n等于3；每个角色的名字不相同。
{answer}... # 你希望对用户说的话，用于询问用户对角色的要求，禁止为空，问题要广泛，不要重复问类似的问题。

如果群聊背景或某个角色的配置文件不需要更新，可以不重复输出{background_token}和对应的{config_token}的内容，只输出\
{answer_token}和需要修改的{config_token}的内容。""",
}


def creator_prompt(lang: str) -> str:
    return CREATOR_PROMPT.get(lang, CREATOR_PROMPT["en"]).format(
        schema=json.dumps(CONFIG_SCHEMA, ensure_ascii=False, indent=2),
        example=json.dumps(CONFIG_EXAMPLE, ensure_ascii=False, indent=2),
        background=BACKGROUND,
        config=CONFIG,
        answer=ANSWER,
        background_token=BACKGROUND.strip(": "),
        config_token=CONFIG.strip(": "),
        answer_token=ANSWER.strip(": "),
    )


class GroupChatCreator(Agent):
    """Designs a group chat with the user (see the module docstring)."""

    fragment_native = True  # _run yields fragments and requests

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        system = Message.unchecked("system", creator_prompt(lang))
        history = [m for m in messages if m.role != "system"]
        sections = Sections()
        yield from self._call_llm([system, *as_written(history)], view=sections)
        tail = sections.finish()
        if tail:
            yield tail


def as_written(messages: list[Message]) -> list[Message]:
    """The conversation with each earlier response (background, configs, answer) joined back into one
    assistant message in the model's own format."""
    out: list[Message] = []
    parts: list[str] = []
    for m in messages:
        if m.role != ASSISTANT:
            if parts:  # a response that ended without an answer
                out.append(Message.unchecked(ASSISTANT, "\n".join(parts)))
                parts = []
            out.append(m)
        elif m.name == "background":
            parts.append(BACKGROUND + m.text)
        elif m.name == "role_config":
            parts.append(CONFIG + m.text)
        else:
            out.append(Message.unchecked(ASSISTANT, "\n".join([*parts, ANSWER + m.text])))
            parts = []
    if parts:
        out.append(Message.unchecked(ASSISTANT, "\n".join(parts)))
    return out


class Sections(View):
    """A view of the creator's reply that splits it at its markers into messages (see the module docstring);
    work per piece is proportional to the piece (plus a marker's length)."""

    def __init__(self) -> None:
        self.kind: str | None = None  # None before the first marker
        self.held = ""  # a suffix that may be the start of a marker
        self.pending: list[str] = []  # text of a section shown only when complete (configs, leading text)
        self.index: int | None = None  # the message of the streamed section, once it has text
        self.count = 0  # messages started
        self.seen_marker = False

    def __call__(self, fragments: list[Message]) -> list[Message]:
        text = "".join(f.content for f in fragments if isinstance(f.content, str))
        out = self.feed(text) if text else []
        return out + [f.copy(content="") for f in fragments if f.reasoning_content]

    def feed(self, text: str) -> list[Message]:
        out: list[Message] = []
        buf = self.held + text
        while True:
            found = [(buf.find(m), m) for m in MARKERS if m in buf]
            if not found:
                keep = _partial_marker(buf)
                self._add(buf[: len(buf) - keep], out)
                self.held = buf[len(buf) - keep :]
                return out
            pos, marker = min(found)
            self._add(buf[:pos], out)
            self._end(out)
            self.kind, self.seen_marker, buf = MARKERS[marker], True, buf[pos + len(marker) :]

    def finish(self) -> list[Message]:
        """After the stream: the rest of the reply."""
        out: list[Message] = []
        self._add(self.held, out)
        self.held = ""
        if not self.seen_marker:  # no markers at all: the whole reply is the answer
            self.kind, text, self.pending = "answer", "".join(self.pending), []
            self._add(text, out)
        self._end(out)
        return out

    def _add(self, text: str, out: list[Message]) -> None:
        if not text:
            return
        if self.kind in ("background", "answer"):
            if self.index is None:
                self.index, self.count = self.count, self.count + 1
            name = "background" if self.kind == "background" else None
            out.append(fragment(Message.unchecked(ASSISTANT, text, name), self.index))
        else:
            self.pending.append(text)

    def _end(self, out: list[Message]) -> None:
        """The current section is over (a marker follows, or the reply ended)."""
        text = "".join(self.pending).strip()
        if self.kind == "role_config":
            try:
                valid = isinstance(parse_json(text), dict)
            except ToolArgumentError:
                valid = False
            if valid:
                out.append(fragment(Message.unchecked(ASSISTANT, text, "role_config"), self.count))
                self.count += 1
            else:
                logger.warning("group chat creator: a role config that is not a JSON object was left out: %.200r", text)
        elif self.kind is None and text:
            logger.debug("group chat creator: dropped the text before the first marker: %.200r", text)
        self.pending, self.index = [], None


def _partial_marker(text: str) -> int:
    """How much of the end of `text` may be the beginning of a marker."""
    start = text.rfind("<", max(0, len(text) - max(map(len, MARKERS))))
    if start >= 0 and any(m.startswith(text[start:]) for m in MARKERS):
        return len(text) - start
    return 0


__all__ = ["GroupChatCreator", "Sections", "as_written"]
