"""Assistant: answers from the user's files. Retrieves the best excerpts, gives them with the question, cites.

    from chatagent import Assistant
    bot = Assistant(llm=cfg, files=['manual.pdf', 'notes.docx'])
    for rsp in bot.run([{'role': 'user', 'content': [{'text': 'How do I install packages?'}, {'file': 'extra.pptx'}]}]):
        ...
    rsp[-1]['extra']['sources']   # [{'file': 'manual.pdf', 'pages': [12], 'text': '...'}, ...], best first

Files come from `files=` and from the file items of every user message (paths or http(s) URLs). Each
user message reaches the model preceded by the best excerpts of the files for it, each headed
`[file, p. N]`; the system message asks the model to cite them that way. Excerpts already given in an
earlier turn are not repeated, and an earlier turn gets the same excerpts on every run, so the prompt
of a follow-up begins exactly as the last one did and a server's prompt cache (llama.cpp's
`cache_prompt`, DashScope's and OpenAI's prefix caches) reads only what is new. A follow-up that says
too little to be searched on its own ("And an example?") is searched as the question before it.

**Budget.** The excerpts of a question fit what the model's window leaves after the system message,
the question, the tools and the answer's `max_tokens` (counted with the model's tokenizer), and at
most `rag_cfg['max_ref_token']` (default: a sixth of the window, at most 4000). Earlier turns do not
count: when the whole conversation does not fit, the model drops the oldest turns first. A question
that alone exceeds the window still raises `ModelServiceError('context_too_long')`.

**Sources.** The final answer carries `extra['sources']`: the excerpts chosen for the question, best
first, as `{'file', 'pages', 'text'}` (see `Chunk.as_source`), whatever the model writes.

**Progress.** `rag_cfg['on_progress']` (or `run(..., on_progress=f)`) gets a `chatagent.rag.Progress`
per page read, file loaded, index built and search; run callbacks get them as `progress` events.

A file that cannot be read is named to the model, which tells the user; the answer comes from the rest.
Files are parsed and indexed once (see `chatagent.rag.store`). The Assistant is a FnCallAgent: it also
calls the tools in `function_list`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chatagent.agent import current_run
from chatagent.agents.fncall import FnCallAgent
from chatagent.errors import ModelServiceError
from chatagent.llm.budget import prompt_tokens, truncate_messages
from chatagent.rag.parsers import display_name
from chatagent.run.events import PROGRESS, Event, emit
from chatagent.schema import ASSISTANT, SYSTEM, USER, ContentItem, Message, with_system_text
from chatagent.schema.fragment import Fragment
from chatagent.tools.retrieval import DEFAULT_MAX_REF_TOKEN, allowed_files, message_files

if TYPE_CHECKING:
    from chatagent.llm.base import BaseChatModel
    from chatagent.rag.chunking import Chunk
    from chatagent.rag.progress import Progress, ProgressCallback
    from chatagent.rag.store import DocStore

__all__ = ["Assistant", "message_files"]

logger = logging.getLogger("chatagent.agent")

RAG_CFG_KEYS = ("max_ref_token", "passwords", "on_progress", "store", "chunk_tokens", "overlap_tokens", "max_bytes")
WINDOW_SHARE = 6  # by default the excerpts of one question take at most a sixth of the window
MIN_EXCERPT_TOKENS = 50  # less room than this: no excerpts (the question alone may still fit)
BLOCK_MARGIN = 8  # tokens kept free in a turn's excerpts: a text counted in pieces may count a little more whole
FOLLOW_UP_TERMS = 3  # a question with fewer search terms is searched as the one before it

PROMPTS = {
    "en": {
        "system": "The user's messages may begin with excerpts from their files, each headed by its source as "
        "[file, p. N]. Answer from the excerpts when they are relevant and cite the source of what you use in "
        "the same form, e.g. [manual.pdf, p. 3]. If they do not contain the answer, say so and answer from what "
        "you know, without citing.",
        "excerpts": "Excerpts from my files:",
        "unreadable": "These files could not be read; tell me which and why:",
        "question": "My question:",
    },
    "zh": {
        "system": "用户的消息开头可能附有其文件的摘录，每段开头用 [文件, p. 页码] 标明出处。回答时如果用到这些摘录，"
        "请用同样的格式注明出处，例如 [manual.pdf, p. 3]。如果摘录中没有答案，请说明，然后根据你已有的知识回答，不要标注出处。",
        "excerpts": "我的文件中的摘录：",
        "unreadable": "以下文件无法读取，请告诉我是哪个文件以及原因：",
        "question": "我的问题：",
    },
}


@dataclass(slots=True)
class _Turn:
    """The excerpts given with one user message."""

    index: int  # of the user message in the conversation
    chunks: list[Chunk]  # chosen for it, best first
    new: list[Chunk]  # the ones not given in an earlier turn
    errors: list[str] = field(default_factory=list)  # files that newly failed


class Assistant(FnCallAgent):
    """A FnCallAgent that answers from files (see the module docstring).

    Args:
        files: paths or URLs always searched, in addition to the files in the user's messages.
        rag_cfg: `max_ref_token` (the most tokens of excerpts per question; default: a sixth of the
            model's window, at most 4000), `passwords` ({file name or path: password} for encrypted
            PDFs), `on_progress` (a callback given a `chatagent.rag.Progress` per page, file, index
            and search), `store` (a `chatagent.rag.DocStore`; default: the workspace's), or
            `chunk_tokens` / `overlap_tokens` / `max_bytes` for a store of its own.
        function_list, llm, system_message, name, description, ...: see FnCallAgent.
    """

    def __init__(
        self,
        function_list: list | None = None,
        llm: Any = None,
        system_message: str | None = None,
        name: str | None = None,
        description: str | None = None,
        files: list[str] | None = None,
        rag_cfg: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(function_list, llm, system_message, name, description, files, **kwargs)
        cfg = dict(rag_cfg or {})
        unknown = sorted(set(cfg) - set(RAG_CFG_KEYS))
        if unknown:
            logger.warning("Assistant: ignoring unknown rag_cfg keys %s", unknown)
        self.max_ref_token: int | None = int(cfg["max_ref_token"]) if cfg.get("max_ref_token") else None
        self.passwords: dict[str, str] = dict(cfg.get("passwords") or {})
        self.on_progress: ProgressCallback | None = cfg.get("on_progress")
        self.store: DocStore = cfg.get("store") or _make_store(cfg)

    async_safe = True  # reading files goes through _blocking
    fragment_native = True

    def _run(self, messages: list[Message], lang: str = "en", **kwargs: Any) -> Iterator[list[Message]]:
        report = self._reporter(kwargs.pop("on_progress", None) or self.on_progress)
        if not allowed_files(self.files, messages):
            return (yield from super()._run(_files_as_text(messages), lang=lang, **kwargs))
        prompts = PROMPTS["zh" if lang == "zh" else "en"]
        messages = with_system_text(messages, prompts["system"])
        messages, sources = yield from self._blocking(self._with_excerpts, messages, prompts, report)
        current_run().check_deadline()  # reading many new files can take a while
        response = yield from super()._run(_files_as_text(messages), lang=lang, **kwargs)
        if response and response[-1].role == ASSISTANT and response[-1].function_call is None:
            yield [Fragment.unchecked(ASSISTANT, "", None, None, None, {"sources": sources}, len(response) - 1)]
        return response

    # ---- excerpts ---------------------------------------------------------------------------------------

    def _with_excerpts(
        self, messages: list[Message], prompts: dict[str, str], report: ProgressCallback
    ) -> tuple[list[Message], list[dict]]:
        """`messages` with each user message preceded by its excerpts, and the latest question's sources."""
        llm = self.llm
        cfg = {**self.extra_generate_cfg, **(current_run().generate_cfg or {})}
        system = [messages[0]] if messages[0].role == SYSTEM else []
        fixed = llm.functions_tokens(self.functions, cfg)
        users = [i for i, m in enumerate(messages) if m.role == USER]
        turns: list[_Turn] = []
        given: set[str] = set()
        failed: set[str] = set()
        for i in users:
            files = allowed_files(self.files, messages[: i + 1])
            if not files:
                continue
            room = llm.input_limit(cfg) - prompt_tokens(system + [messages[i]], llm.tokenizer, fixed)
            budget = min(self._max_ref_tokens(llm), room - llm.count_tokens(_block_frame(prompts)))
            chunks, errors = self._excerpts(files, _query(messages, users, i), budget, llm, report)
            turn = _Turn(i, chunks, [c for c in chunks if c.id not in given], sorted(set(errors) - failed))
            given.update(c.id for c in chunks)
            failed.update(errors)
            turns.append(turn)
        out = _place(messages, turns, prompts)
        if len(turns) > 1:  # the latest excerpts must not rely on turns the model will drop to fit
            out = self._refit_latest(out, messages, turns, prompts, llm, cfg, fixed)
        latest = turns[-1] if turns and turns[-1].index == users[-1] else None
        return out, [c.as_source() for c in latest.chunks] if latest else []

    def _excerpts(
        self, files: list[str], query: str, budget: int, llm: BaseChatModel, report: ProgressCallback
    ) -> tuple[list[Chunk], list[str]]:
        """The best chunks for `query` that fit `budget` tokens of the model's, and the files that failed."""
        deadline = current_run().deadline  # parsing a large new file stops there too
        if budget < MIN_EXCERPT_TOKENS:
            _, failures = self.store.load(files, passwords=self.passwords, on_progress=report, deadline=deadline)
            return [], [str(e) for e in failures]
        budget -= BLOCK_MARGIN
        target = budget
        for _ in range(4):  # chunks are sized by the estimate: check with the model's tokenizer, shrink
            found = self.store.retrieve(
                files, query, target, passwords=self.passwords, on_progress=report, deadline=deadline
            )
            chunks = list(found.chunks)
            sizes = llm.tokenizer.count_many([_excerpt_text(c) + "\n\n" for c in chunks])
            used = sum(sizes)
            if used <= budget:
                break
            target = max(int(target * budget / used) - 8, 0)
        while chunks and sum(sizes) > budget:
            chunks.pop()
            sizes.pop()
        return chunks, [str(e) for e in found.errors]

    def _refit_latest(
        self,
        out: list[Message],
        messages: list[Message],
        turns: list[_Turn],
        prompts: dict[str, str],
        llm: BaseChatModel,
        cfg: dict[str, Any],
        fixed: int,
    ) -> list[Message]:
        """When the conversation is too long, the model drops the oldest turns: give the latest question again
        the excerpts that only those turns held."""
        latest = turns[-1]
        for _ in range(len(turns)):
            try:
                kept = truncate_messages(out, llm.input_limit(cfg) - fixed, llm.tokenizer)
            except ModelServiceError:  # the model raises it again, with its message, when it is called
                return out
            kept_ids = {id(m) for m in kept}
            seen = {c.id for t in turns[:-1] if id(out[t.index]) in kept_ids for c in t.chunks}
            new = [c for c in latest.chunks if c.id not in seen]
            if len(new) == len(latest.new):
                return out
            latest.new = new
            out = _place(messages, turns, prompts)
        return out

    def _max_ref_tokens(self, llm: BaseChatModel) -> int:
        if self.max_ref_token is not None:
            return self.max_ref_token
        window = llm.context_window
        return min(DEFAULT_MAX_REF_TOKEN, window // WINDOW_SHARE) if window else DEFAULT_MAX_REF_TOKEN

    def _reporter(self, on_progress: ProgressCallback | None) -> Callable[[Progress], None]:
        """A progress callback that calls `on_progress` and tells the run's callbacks (as `progress` events)."""
        callbacks = current_run().callbacks

        def report(p: Progress) -> None:
            if callbacks:
                emit(callbacks, Event(PROGRESS, self.name, data={"progress": p, "text": p.describe()}))
            if on_progress is not None:
                on_progress(p)

        return report


def _make_store(cfg: dict[str, Any]) -> DocStore:
    """A store of its own when `cfg` sets chunking or size options, else the workspace's."""
    from chatagent.rag.store import DocStore, default_store  # numpy, parsers: on first use

    options = {k: cfg[k] for k in ("chunk_tokens", "overlap_tokens", "max_bytes") if k in cfg}
    return DocStore(**options) if options else default_store()


def _query(messages: list[Message], users: list[int], i: int) -> str:
    """What to search for user message `i`: its text; for a follow-up that says too little on its own ("And
    an example?"), what the question before it searched, so that it gets the same excerpts (already given)."""
    from chatagent.rag.analysis import analyze  # jieba and stemmers: on first use

    text = messages[i].text
    k = users.index(i)
    if k and len(set(analyze(text))) < FOLLOW_UP_TERMS:
        return _query(messages, users, users[k - 1])
    return text


def _excerpt_text(chunk: Chunk) -> str:
    return f"[{chunk.source}, {chunk.pages}]\n{chunk.text}"


def _block_frame(prompts: dict[str, str]) -> str:
    """The fixed text around a turn's excerpts, for counting."""
    return f"{prompts['excerpts']}\n\n\n\n{prompts['question']} "


def _place(messages: list[Message], turns: list[_Turn], prompts: dict[str, str]) -> list[Message]:
    """A copy of `messages` whose user messages start with their turn's new excerpts (and unreadable files)."""
    out = list(messages)
    for turn in turns:
        parts = []
        if turn.new:
            parts.append(prompts["excerpts"] + "\n\n" + "\n\n".join(_excerpt_text(c) for c in turn.new))
        if turn.errors:
            parts.append(prompts["unreadable"] + "\n" + "\n".join(f"- {e}" for e in turn.errors))
        if parts:
            out[turn.index] = _with_leading_text(
                messages[turn.index], "\n\n".join(parts) + "\n\n" + prompts["question"]
            )
    return out


def _with_leading_text(m: Message, text: str) -> Message:
    if isinstance(m.content, str):
        return m.copy(content=f"{text} {m.content}")
    return m.copy(content=[ContentItem(text=text), *m.content])


def _files_as_text(messages: list[Message]) -> list[Message]:
    """File items become `[file: name]` text: their excerpts go with the message already."""
    out = []
    for m in messages:
        if not isinstance(m.content, str) and any(item.file is not None for item in m.content):
            items = [
                ContentItem(text=f"[file: {display_name(item.file)}]") if item.file is not None else item
                for item in m.content
            ]
            m = m.copy(content=items)
        out.append(m)
    return out
