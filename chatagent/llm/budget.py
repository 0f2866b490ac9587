"""Token budgets: how large a model's window is, how many tokens a prompt takes, and fitting a conversation in.

Every model answers three questions through `TokenBudget`, which `BaseChatModel` inherits: its `context_window`
(from the server for the embedded model, else from the model's name, see `known_context_window`), how many tokens
the prompt may take (`input_limit`: the window less the answer's `max_tokens`, or `max_input_tokens` from
generate_cfg), and how many tokens given text takes (`tokenizer`). `prompt_tokens` counts a whole
prompt the way chat templates lay it out; `truncate_messages` fits a conversation by a fixed rule.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from chatagent.errors import ModelErrorCode, ModelServiceError
from chatagent.llm.fncall.formats import get_format
from chatagent.llm.prepare import normalize_functions
from chatagent.llm.prices import bare_model_name
from chatagent.llm.settings import Settings, split_generate_cfg
from chatagent.schema import FUNCTION, SYSTEM, USER, ContentItem, Message, content_text, to_messages
from chatagent.utils.jsonlenient import json_copy
from chatagent.utils.tokens import ESTIMATE, Tokenizer, tokenizer_for

logger = logging.getLogger("chatagent.llm")

DEFAULT_MAX_INPUT_TOKENS = 58_000  # a model whose window is unknown
MESSAGE_OVERHEAD = 5  # tokens a chat template adds per message (ChatML: <|im_start|>role\n ... <|im_end|>\n)
FUNCTION_RESULT_KEEP_TOKENS = 500  # an old function result is shortened to this before turns are dropped
MIN_KEPT_INPUT_TOKENS = 16  # an over-long latest message is shortened only if at least this much of it stays
SHORTEN, RAISE = "shorten", "raise"  # generate_cfg['long_input']: what an over-long latest message gets

# Context windows (prompt + answer, in tokens) of common models, by the start of their name; the first
# match wins. Open-weight Qwen models are listed at their native window (servers such as vLLM default to it).
KNOWN_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("qwen-long", 1_000_000),
    ("qwen-turbo", 131_072),
    ("qwen-plus", 131_072),
    ("qwen-max", 32_768),
    ("qwen3-max", 262_144),
    ("qwen3-coder", 262_144),
    ("qwen-vl", 131_072),
    ("qwen-omni", 32_768),
    ("qwq", 131_072),
    ("qvq", 131_072),
    ("qwen3", 32_768),
    ("qwen2.5", 32_768),
    ("qwen2", 32_768),
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini", 1_048_576),
    ("nova-premier", 1_000_000),
    ("nova-pro", 300_000),
    ("nova-lite", 300_000),
    ("nova-micro", 128_000),
)


def known_context_window(model: str) -> int | None:
    """The context window of a well-known model, by its name (None when unknown)."""
    name = bare_model_name(model or "")
    for prefix, window in KNOWN_CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def default_answer_tokens(window: int) -> int:
    """Tokens kept for the answer when `max_tokens` is not set: a quarter of the window, at most 8192."""
    return min(8192, window // 4)


def message_text(m: Message) -> str:
    """Everything of `m` that reaches the model as text (content, call, reasoning), for counting."""
    text = content_text(m.content)
    fc = m.function_call
    if fc is not None:
        text = f"{text}\n{fc.name}\n{fc.arguments}" if text else f"{fc.name}\n{fc.arguments}"
    if m.reasoning_content:
        text = f"{m.reasoning_content}\n{text}"
    return text


def most_tokens(m: Message) -> int:
    """More tokens than any tokenizer makes of `m` (one per UTF-8 byte at most, four bytes a character at most),
    counted without tokenizing."""
    content = m.content
    chars = len(content) if type(content) is str else len(content_text(content))
    fc = m.function_call
    if fc is not None:
        chars += len(fc.name) + len(fc.arguments) + 2
    if m.reasoning_content:
        chars += len(m.reasoning_content) + 1
    return 4 * chars + MESSAGE_OVERHEAD


def message_tokens(m: Message, tokenizer: Tokenizer = ESTIMATE) -> int:
    """Tokens `m` takes in a prompt, its template's markers included."""
    return tokenizer.count(message_text(m)) + MESSAGE_OVERHEAD


def messages_tokens(msgs: Sequence[Message], tokenizer: Tokenizer = ESTIMATE) -> list[int]:
    """`message_tokens` of each message, counted in one call of the tokenizer."""
    return [n + MESSAGE_OVERHEAD for n in tokenizer.count_many([message_text(m) for m in msgs])]


def prompt_tokens(msgs: Sequence[Message], tokenizer: Tokenizer = ESTIMATE, extra: int = 0) -> int:
    """Tokens of a whole prompt: the messages, the reply's opening, and `extra` (e.g. tool schemas)."""
    return sum(messages_tokens(msgs, tokenizer)) + tokenizer.prompt_overhead + extra


def truncate_messages(
    msgs: list[Message],
    max_tokens: int,
    tokenizer: Tokenizer = ESTIMATE,
    *,
    long_input: str = SHORTEN,
    most: int | None = None,
) -> list[Message]:
    """Fit the conversation into `max_tokens` (counted by `tokenizer`, template overhead included) by a fixed rule.

    1. The system message and the latest turn (the last user message and all after it) are always kept.
    2. Function results before the latest turn are shortened, oldest first, to FUNCTION_RESULT_KEEP_TOKENS.
    3. Then whole earlier turns are dropped, oldest first (a call is never separated from its result).
    4. Then function results of the latest turn, largest first, are cut at the end (marked "[truncated]")
       to fit, down to FUNCTION_RESULT_KEEP_TOKENS each: a tool that returns megabytes does not end the run.
    5. If the kept part is still too long, the latest user message is shortened in the middle, its beginning
       and end kept (as Qwen-Agent does); with `long_input='raise'`, or when even that cannot make it fit,
       ModelServiceError('context_too_long') is raised instead.

    `most`: the sum of the messages' `most_tokens`, when the caller has it (`chatagent.llm.inputs.Prepared`).
    """
    budget = max_tokens - tokenizer.prompt_overhead
    if (sum(map(most_tokens, msgs)) if most is None else most) <= budget:  # surely fits: not counted (every call)
        return msgs
    sizes = messages_tokens(msgs, tokenizer)
    total = sum(sizes)
    if total <= budget:
        return msgs
    msgs = list(msgs)
    head = 1 if msgs[0].role == SYSTEM else 0
    last_user = max((i for i, m in enumerate(msgs) if m.role == USER), default=head)
    last_user = max(last_user, head)

    def shorten(i: int, keep: int) -> None:
        nonlocal total
        msgs[i] = msgs[i].copy(content=tokenizer.truncate(content_text(msgs[i].content), keep))
        new = message_tokens(msgs[i], tokenizer)
        total += new - sizes[i]
        sizes[i] = new

    for i in range(head, last_user):
        if total <= budget:
            break
        if msgs[i].role == FUNCTION and sizes[i] > FUNCTION_RESULT_KEEP_TOKENS + MESSAGE_OVERHEAD:
            shorten(i, FUNCTION_RESULT_KEEP_TOKENS)
    start = head
    while total > budget and start < last_user:
        # drop one whole turn: up to the next user message
        end = start + 1
        while end < last_user and msgs[end].role != USER:
            end += 1
        total -= sum(sizes[start:end])
        start = end
    if total > budget:
        results = sorted((i for i in range(last_user, len(msgs)) if msgs[i].role == FUNCTION), key=lambda i: -sizes[i])
        for i in results:
            keep = max(FUNCTION_RESULT_KEEP_TOKENS, sizes[i] - MESSAGE_OVERHEAD - (total - budget))
            if total <= budget or keep >= sizes[i] - MESSAGE_OVERHEAD:
                continue
            before = sizes[i]
            shorten(i, keep)
            logger.warning("input truncated: a function result of %d tokens cut to %d", before, sizes[i])
    if total > budget and long_input == SHORTEN and msgs[last_user].role == USER:
        keep = sizes[last_user] - MESSAGE_OVERHEAD - (total - budget)
        if keep >= MIN_KEPT_INPUT_TOKENS:
            before = sizes[last_user]
            msgs[last_user] = _shortened(msgs[last_user], keep, tokenizer)
            sizes[last_user] = message_tokens(msgs[last_user], tokenizer)
            total += sizes[last_user] - before
            logger.warning("input truncated: the latest user message of %d tokens cut to %d in the middle", before,
                           sizes[last_user])  # fmt: skip
    if total > budget:
        raise ModelServiceError(
            ModelErrorCode.CONTEXT_TOO_LONG,
            f"the latest turn needs about {total + tokenizer.prompt_overhead} tokens, more than max_input_tokens={max_tokens}; "
            "shorten the input or raise max_input_tokens",
        )
    if start > head:
        logger.warning("input truncated: dropped %d earlier messages to fit %d tokens", start - head, max_tokens)
    return msgs[:head] + msgs[start:]


def _shortened(m: Message, keep: int, tokenizer: Tokenizer) -> Message:
    """`m` with its text cut to `keep` tokens in the middle (its longest text item, when it has several parts)."""
    if isinstance(m.content, str):
        return m.copy(content=tokenizer.truncate_middle(m.content, keep))
    items = list(m.content)
    texts = {i: item.text for i, item in enumerate(items) if item.text is not None}
    if not texts:
        return m
    longest = max(texts, key=lambda i: len(texts[i]))
    others = sum(tokenizer.count_many([t for i, t in texts.items() if i != longest]))
    items[longest] = ContentItem(text=tokenizer.truncate_middle(texts[longest], max(keep - others, 1)))
    return m.copy(content=items)


class TokenBudget:
    """A chat model's token budget, as `BaseChatModel` answers it (a backend that knows better overrides
    `context_window` or `_make_tokenizer`)."""

    model: str
    generate_cfg: dict[str, Any]
    native_tools: bool
    window_from_server: bool
    _tokenizer: Tokenizer | None

    @property
    def tokenizer(self) -> Tokenizer:
        """How this model counts tokens: its own tokenizer where one is at hand, else the estimate."""
        if self._tokenizer is None:
            self._tokenizer = self._make_tokenizer()
        return self._tokenizer

    def _make_tokenizer(self) -> Tokenizer:
        return tokenizer_for(self.model)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` for this model."""
        return self.tokenizer.count(text)

    @property
    def context_window(self) -> int | None:
        """The model's whole window (prompt and answer) in tokens, when known (see `known_context_window`)."""
        return known_context_window(self.model)

    def max_tokens(self, extra_generate_cfg: dict[str, Any] | None = None) -> int | None:
        """The answer's token limit set in generate_cfg (`max_tokens` or `max_completion_tokens`), if any."""
        cfg = {**self.generate_cfg, **(extra_generate_cfg or {})}
        value = cfg.get("max_tokens") or cfg.get("max_completion_tokens")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def input_limit(self, extra_generate_cfg: dict[str, Any] | None = None) -> int:
        """How many tokens the prompt may take: generate_cfg's `max_input_tokens` when set, else the window
        less the answer's `max_tokens` (a quarter of the window, at most 8192, when that is not set)."""
        explicit = {**self.generate_cfg, **(extra_generate_cfg or {})}.get("max_input_tokens")
        window = self.context_window
        if window is None:
            return explicit or DEFAULT_MAX_INPUT_TOKENS
        room = max(window - (self.max_tokens(extra_generate_cfg) or default_answer_tokens(window)), 1)
        if explicit is None:
            return room
        return min(explicit, room) if self.window_from_server else explicit

    def functions_tokens(
        self, functions: Iterable[Any] | None, extra_generate_cfg: dict[str, Any] | None = None
    ) -> int:
        """Tokens the tool schemas take in the prompt (as `tools`, or as the prompt-based format's text)."""
        funcs = normalize_functions(functions)
        if not funcs:
            return 0
        settings, _ = split_generate_cfg({**self.generate_cfg, **(extra_generate_cfg or {})})
        return self.tokenizer.count(self._tools_text(funcs, settings))

    def _tools_text(self, funcs: list[dict[str, Any]], settings: Settings) -> str:
        if settings.fncall_prompt_type or not self.native_tools:
            if settings.function_choice == "none":  # the prompt then describes no tools
                return ""
            fmt = get_format(settings.fncall_prompt_type or "nous")
            system, _ = fmt.convert([], funcs, settings.function_choice or "auto", settings.parallel_function_calls)
            return content_text(system[0].content)
        return "\n".join(_tool_json(f) for f in funcs)

    def tokens_left(
        self,
        messages: Iterable[dict[str, Any] | Message],
        functions: Iterable[Any] | None = None,
        extra_generate_cfg: dict[str, Any] | None = None,
    ) -> int:
        """Tokens still free in the prompt after `messages` and `functions`: what an agent may add."""
        msgs = to_messages(messages)
        used = prompt_tokens(msgs, self.tokenizer, self.functions_tokens(functions, extra_generate_cfg))
        return self.input_limit(extra_generate_cfg) - used


#: a tool schema's JSON as counted (`_tool_json`): its name -> (its description, a copy of its parameters, JSON)
_TOOL_JSON: dict[Any, tuple[Any, Any, str]] = {}
_TOOL_JSON_MAX = 1024


def _tool_json(f: dict[str, Any]) -> str:
    """The JSON of a normalised function schema as a native `tools` entry, made once per schema while it is unchanged
    (every model call counts the tools it offers: the same schemas each time, and every agent made of the same
    functions offers equal ones, each its own copy: found by name, compared by value)."""
    params, name = f["parameters"], f["name"]
    known = _TOOL_JSON.get(name)
    if known is not None and known[1] == params and known[0] == f["description"]:
        return known[2]
    text = json.dumps({"type": "function", "function": f}, ensure_ascii=False)
    if len(_TOOL_JSON) >= _TOOL_JSON_MAX:
        _TOOL_JSON.clear()
    _TOOL_JSON[name] = (f["description"], json_copy(params), text)
    return text
