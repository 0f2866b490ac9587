"""The framework's own generate_cfg settings (`Settings`, taken out of generate_cfg by `split_generate_cfg`), the
config-key check every backend runs, the per-request cfg capped by the run's deadline (`attempt_cfg`), and how the
model may call tools (`ToolChoice`, handed to backends as a typed keyword, never inside cfg)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from chatagent.errors import RunDeadlineExceeded
from chatagent.llm.fncall.formats import FORMATS
from chatagent.utils.kwargs import unexpected_keyword

# generate_cfg keys the framework reads itself; every other key goes to the backend's request.
FRAMEWORK_KEYS = frozenset(
    {
        "max_retries",
        "retry_delay",
        "max_retry_wait",
        "max_input_tokens",
        "long_input",
        "fncall_prompt_type",
        "parallel_function_calls",
        "function_choice",
        "request_timeout",
        "deadline",
        "use_raw_api",
        "thought_in_content",
        "lang",
        "cache",
        "cache_nondeterministic",
        "cache_dir",
        "max_rpm",
        "price",
        "recover_calls",
        "max_calls_per_reply",
    }
)
# Qwen-Agent keys that have no effect here: taken out of the request, never sent (a strict server rejects them)
IGNORED_KEYS = frozenset({"skip_stopword_postproc"})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """How the model may call the functions of one request, as a backend receives it (`tool_choice=`).

    `choice`: 'auto' (the model decides), 'none' (no call), 'required' (at least one call) or a function's name
    (that function); `parallel`: whether one reply may hold several calls. Set by generate_cfg's
    `function_choice` and `parallel_function_calls`.
    """

    choice: str = "auto"
    parallel: bool = True

    def request_field(self) -> str | dict[str, Any] | None:
        """The `tool_choice` request field of OpenAI's API (DashScope's takes the same): 'none', 'required' or
        the named function; None for 'auto' (the server's default, not sent)."""
        if self.choice == "auto":
            return None
        if self.choice in ("none", "required"):
            return self.choice
        return {"type": "function", "function": {"name": self.choice}}


#: The default: the model decides, several calls allowed. A backend is passed `tool_choice` only when it differs.
DEFAULT_TOOL_CHOICE = ToolChoice()


@dataclass
class Settings:
    """The framework's own settings for one call, taken out of generate_cfg."""

    max_retries: int = 3
    retry_delay: float = 0.5
    max_retry_wait: float = 60.0
    max_input_tokens: int | None = None  # None: the model's input_limit()
    long_input: str = "shorten"  # a latest message over max_input_tokens: shortened in the middle, or 'raise'
    fncall_prompt_type: str | None = None
    parallel_function_calls: bool = True
    function_choice: str = "auto"
    request_timeout: float | None = None
    deadline: float | None = None  # a time.monotonic() value; Agent.run(deadline=...) sets it
    use_raw_api: bool | None = None  # Qwen-Agent's switch: True native tool calling, False prompt-based
    thought_in_content: bool = False  # `<think>...</think>` in the reply's text is reasoning
    lang: str | None = None  # Qwen-Agent's; chatagent detects the language of each conversation itself
    cache: Any = None  # the response cache: 'sqlite:///file.db' or a directory (see chatagent.llm.cache)
    cache_nondeterministic: bool = False  # cache answers of sampling settings too
    cache_dir: Any = None  # Qwen-Agent's name for `cache` with a directory
    max_rpm: float | None = None  # requests a minute to this model, across the process (chatagent.llm.pacing)
    price: Any = None  # {'input': usd, 'output': usd} per million tokens, over the table (chatagent.llm.prices)
    recover_calls: bool | None = None  # calls left in the text taken as calls (None: see llm.recovered_calls)
    max_calls_per_reply: int = 32  # calls recovered from one reply: this many, and one past it saying how many

    def tool_choice(self) -> ToolChoice:
        """`function_choice` and `parallel_function_calls` as the backend receives them."""
        return ToolChoice(self.function_choice or "auto", bool(self.parallel_function_calls))


def choice_args(tool_choice: ToolChoice) -> dict[str, ToolChoice]:
    """The `tool_choice=` keyword for a backend method: none for the default, so that a backend which does not
    take the keyword still works (see BaseChatModel)."""
    return {} if tool_choice == DEFAULT_TOOL_CHOICE else {"tool_choice": tool_choice}


def backend_choice(funcs: list[dict[str, Any]] | None, settings: Settings) -> dict[str, ToolChoice]:
    """`choice_args` for a request offering `funcs` (a request without functions gets no tool choice)."""
    return choice_args(settings.tool_choice()) if funcs else {}


def split_generate_cfg(cfg: dict[str, Any]) -> tuple[Settings, dict[str, Any]]:
    """Framework settings and the keys to pass through to the backend."""
    ours = {k: v for k, v in cfg.items() if k in FRAMEWORK_KEYS and v is not None}
    rest = {k: v for k, v in cfg.items() if k not in FRAMEWORK_KEYS and k not in IGNORED_KEYS}
    for key in ("use_raw_api", "thought_in_content", "recover_calls"):  # Qwen-Agent's docs write them as strings too
        value = ours.get(key)
        if isinstance(value, str):
            ours[key] = value.strip().lower() in ("true", "1", "yes")
    for key, value in ours.items():
        limit = _NUMERIC_SETTINGS.get(key)
        if limit is not None and not _number_at_least(value, *limit):
            kind = "an integer" if limit[0] else "a number"
            raise ValueError(
                f"generate_cfg[{key!r}] must be {kind} {'>=' if limit[2] else '>'} {limit[1]}, got {value!r}"
            )
    if ours.get("long_input", "shorten") not in ("shorten", "raise"):
        raise ValueError(f"generate_cfg['long_input'] must be 'shorten' or 'raise', got {ours['long_input']!r}")
    choice = ours.get("function_choice")
    if choice is not None and (not isinstance(choice, str) or not choice.strip()):
        raise ValueError(
            f"generate_cfg['function_choice'] must be 'auto', 'none', 'required' or a function's name, got {choice!r}"
        )
    prompt_type = ours.get("fncall_prompt_type")
    if prompt_type is not None and prompt_type not in FORMATS:
        raise ValueError(f"generate_cfg['fncall_prompt_type'] must be one of {sorted(FORMATS)}, got {prompt_type!r}")
    for key, (check, wanted) in _REQUEST_VALUES.items():
        value = rest.get(key)
        if value is not None and not check(value):
            raise ValueError(f"generate_cfg[{key!r}] must be {wanted}, got {value!r}")
    return Settings(**ours), rest


def check_generate_cfg(cfg: dict[str, Any]) -> None:
    """ValueError naming the key, for a generate_cfg value that a call would refuse (a negative `max_retries`, an
    unknown `fncall_prompt_type`, a string `temperature`, ...): checked where a model or an agent is built."""
    split_generate_cfg(cfg)


# key -> (integer only, bound, bound included)
_NUMERIC_SETTINGS: dict[str, tuple[bool, float, bool]] = {
    "max_retries": (True, 0, True),
    "retry_delay": (False, 0, True),
    "max_retry_wait": (False, 0, True),
    "max_input_tokens": (True, 0, False),
    "request_timeout": (False, 0, False),
    "deadline": (False, 0, False),
    "max_rpm": (False, 0, False),
    "max_calls_per_reply": (True, 0, False),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _at_least_zero(value: Any) -> bool:
    return _is_number(value) and value >= 0


def _zero_to_one(value: Any) -> bool:
    return _is_number(value) and 0 <= value <= 1


def _positive(value: Any) -> bool:
    return _is_number(value) and value > 0


def _positive_int(value: Any) -> bool:
    return _is_int(value) and value > 0


def _stop_words(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(s, str) for s in cast(list[Any], value))
    )


#: the efforts `reasoning_effort` takes (besides 'none' and a budget in tokens), across providers
REASONING_EFFORTS = ("minimal", "low", "medium", "high")


def _effort(value: Any) -> bool:
    return value in (*REASONING_EFFORTS, "none") if isinstance(value, str) else _is_int(value) and value >= 0


# request keys every backend sends as they are, and what the servers take: key -> (check, what it must be)
_REQUEST_VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "temperature": (_at_least_zero, "a number >= 0"),
    "top_p": (_zero_to_one, "a number from 0 to 1"),
    "top_k": (_is_int, "an integer"),
    "max_tokens": (_positive_int, "an integer > 0"),
    "seed": (_is_int, "an integer"),
    "reasoning_effort": (_effort, "'minimal', 'low', 'medium', 'high', 'none' or a token budget (an int >= 0)"),
    "presence_penalty": (_is_number, "a number"),
    "frequency_penalty": (_is_number, "a number"),
    "repetition_penalty": (_positive, "a number > 0"),
    "stop": (_stop_words, "a string or a list of strings"),
}


def _number_at_least(value: Any, integer: bool, bound: float, inclusive: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return value >= bound if inclusive else value > bound


def attempt_cfg(cfg: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`cfg` for one request. With `settings.deadline`, `request_timeout` (the backend's connect and read
    timeout) is capped by the time left, so that a stalled server cannot hold a run past its deadline."""
    if settings.deadline is None:
        return cfg
    left = settings.deadline - time.monotonic()
    if left <= 0:
        raise RunDeadlineExceeded("the run went past its deadline before the model was called")
    timeout = cfg.get("request_timeout")
    return {**cfg, "request_timeout": left if timeout is None else min(timeout, left)}


def check_cfg_keys(cls: type, cfg: dict[str, Any]) -> None:
    """TypeError for a config key no class in `cls`'s hierarchy reads (a misspelt `model_server` would
    otherwise fall back to another server without a word)."""
    known: set[str] = {key for k in cls.__mro__ for key in getattr(k, "cfg_keys", ())}
    unknown = [k for k in cfg if k not in known and k not in IGNORED_KEYS]
    if unknown:
        error = unexpected_keyword(f"{cls.__name__} config", unknown, known)
        raise TypeError(str(error).replace("keyword argument", "key"))
