"""CrewAI's `LLM`: a model named as CrewAI names it (`provider/model`), with its settings, as a chatagent model
config; `.call()` asks it once.

    llm = LLM(model="openai/gpt-4o-mini", base_url="http://localhost:8000/v1", api_key="...", temperature=0.2)
    llm.call("Say hi")                                   # the answer's text
    llm.call([{"role": "user", "content": "Say hi"}])

The model runs on chatagent's own backends (`chatagent.llm`): an OpenAI-compatible server for every provider
that has one (`openai/`, `ollama/`, `hosted_vllm/`, ...), DashScope for `dashscope/`. Anything an agent takes
as `llm=` (this, a model name, a chatagent config dict or model) becomes a config with `model_config()`.
"""

from __future__ import annotations

import os
from typing import Any

from chatagent.crewai.custom_llm import CustomModel
from chatagent.llm.base import BaseChatModel
from chatagent.llm.registry import get_chat_model
from chatagent.schema import content_text
from chatagent.utils.kwargs import reject_unknown

# CrewAI's settings that a chat request carries (the rest configure the client)
_GENERATE = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "presence_penalty",
             "frequency_penalty", "seed", "stop", "logit_bias", "response_format")  # fmt: skip
_CLIENT = ("timeout", "max_retries", "api_version", "stream", "reasoning_effort", "n", "logprobs",
           "top_logprobs", "callbacks", "provider", "api_base", "is_litellm", "interceptor",
           "additional_params", "thinking")  # fmt: skip
_DASHSCOPE = ("dashscope",)


class BaseLLM:
    """What CrewAI's custom models subclass: `call(messages, tools=None, callbacks=None, available_functions=None)`
    returning text. chatagent runs such a model through `model_config()` as any other."""

    model: str = ""
    temperature: float | None = None
    stop: list[str] | None = None

    def __init__(self, model: str = "", temperature: float | None = None, **kwargs: Any) -> None:
        self.model = model
        self.temperature = temperature
        self.stop = kwargs.pop("stop", None)
        self.additional_params = kwargs

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             **kwargs: Any) -> Any:  # fmt: skip
        raise NotImplementedError

    def supports_function_calling(self) -> bool:
        return True

    def supports_stop_words(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 8192


class LLM(BaseLLM):
    """A model as CrewAI configures it (see the module docstring)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("LLM needs a model name, e.g. 'openai/gpt-4o-mini'")
        generate = {k: kwargs.pop(k) for k in _GENERATE if k in kwargs}
        client = {k: kwargs.pop(k) for k in _CLIENT if k in kwargs}
        reject_unknown(type(self), kwargs)
        super().__init__(model, temperature)
        self.base_url = base_url or client.pop("api_base", None)
        self.api_key = api_key
        self.stop = generate.get("stop")
        self.generate = {k: v for k, v in generate.items() if v is not None}
        if temperature is not None:
            self.generate["temperature"] = temperature
        self.client = client
        self._model: BaseChatModel | None = None

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    def config(self) -> dict[str, Any]:
        """The chatagent model config of this LLM."""
        name = self.model.split("/", 1)[1] if "/" in self.model else self.model
        cfg: dict[str, Any] = {"model": name}
        if self.provider in _DASHSCOPE:
            cfg["model_type"] = "dashscope"
        else:
            server = self.base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
            cfg["model_type"] = "oai"
            if server:
                cfg["model_server"] = server
        key = self.api_key or os.environ.get(f"{self.provider.upper()}_API_KEY")
        if key:
            cfg["api_key"] = key
        generate = {k: v for k, v in self.generate.items() if k not in ("response_format", "stop")}
        if self.stop:
            generate["stop"] = self.stop if isinstance(self.stop, list) else [self.stop]
        if self.client.get("max_retries") is not None:
            generate["max_retries"] = int(self.client["max_retries"])
        if generate:
            cfg["generate_cfg"] = generate
        return cfg

    def chat_model(self) -> BaseChatModel:
        """The chatagent model (built once)."""
        if self._model is None:
            self._model = get_chat_model(self.config())
        return self._model

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             **kwargs: Any) -> str:  # fmt: skip
        """Ask the model once: `messages` is a text (the user's message) or a list of {'role', 'content'}."""
        reject_unknown(type(self), {k: v for k, v in kwargs.items() if k not in ("from_task", "from_agent")})
        if tools:
            raise ValueError("LLM.call with tools: give the tools to an Agent, which runs them")
        msgs = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        reply = self.chat_model().chat(msgs, stream=False)
        return content_text(reply[-1]["content"]) if reply else ""

    def supports_function_calling(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"LLM(model={self.model!r})"


def model_config(llm: Any) -> Any:
    """What an agent takes as its model, from what CrewAI code gives as `llm=`: an LLM, a model name
    ('openai/gpt-4o' or 'gpt-4o', on the environment's OpenAI-compatible server), a chatagent config or model."""
    if llm is None:
        llm = os.environ.get("MODEL") or os.environ.get("OPENAI_MODEL_NAME") or "openai/gpt-4o-mini"
    if isinstance(llm, str):
        llm = LLM(model=llm)
    if isinstance(llm, LLM):
        return llm.chat_model()  # one model (and HTTP client) for every agent given this LLM
    if isinstance(llm, (dict, BaseChatModel)):
        return llm
    if isinstance(llm, BaseLLM):
        return _custom_model(llm)
    raise TypeError(f"llm must be an LLM, a model name, a config dict or a chat model, got {type(llm).__name__}")


def _custom_model(llm: BaseLLM) -> BaseChatModel:
    """A CrewAI custom model (a BaseLLM whose `call` returns text) as a chatagent model."""
    return CustomModel(llm)


__all__ = ["LLM", "BaseLLM", "model_config"]
