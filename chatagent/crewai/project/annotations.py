"""The decorators of a CrewBase class: `@agent`, `@task`, `@crew`, `@before_kickoff`, `@after_kickoff`, `@llm`,
`@tool`, `@callback`, `@output_json`, `@output_pydantic`. Each marks the method; `@agent`, `@task`, `@llm` and
`@tool` methods also give the same object each time they are called on one instance (CrewAI's memoization)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

MARK = "__crewai_project_role__"


def _marked(role: str, memoize: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"@{role} decorates a method")
        if memoize:
            slot = f"__crewai_made_{fn.__name__}"

            @functools.wraps(fn)
            def made(self: Any, *args: Any, **kwargs: Any) -> Any:
                if args or kwargs:
                    return fn(self, *args, **kwargs)
                cached = self.__dict__.get(slot)
                if cached is None:
                    cached = fn(self)
                    if role == "task" and getattr(cached, "name", None) is None:
                        cached.name = fn.__name__
                    self.__dict__[slot] = cached
                return cached

            setattr(made, MARK, role)
            return made
        setattr(fn, MARK, role)
        return fn

    return decorate


agent = _marked("agent", True)
task = _marked("task", True)
llm = _marked("llm", True)
tool = _marked("tool", True)
crew = _marked("crew", False)
before_kickoff = _marked("before_kickoff", False)
after_kickoff = _marked("after_kickoff", False)
callback = _marked("callback", False)
cache_handler = _marked("cache_handler", False)


def output_json(cls: type) -> type:
    setattr(cls, MARK, "output_json")
    return cls


def output_pydantic(cls: type) -> type:
    setattr(cls, MARK, "output_pydantic")
    return cls


__all__ = ["after_kickoff", "agent", "before_kickoff", "cache_handler", "callback", "crew", "llm", "output_json",
           "output_pydantic", "task", "tool"]  # fmt: skip
