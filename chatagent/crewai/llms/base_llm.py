"""`crewai.llms.base_llm.BaseLLM`: subclass it with `call(messages, ...)` returning text for a model of your own."""

from chatagent.crewai.llm import BaseLLM

__all__ = ["BaseLLM"]
