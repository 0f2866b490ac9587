"""What starts a flow's methods: `@start()`, `@listen(...)`, `@router(...)`, and the conditions `or_`, `and_`.

    @listen(fetch)              # when the method `fetch` completes
    @listen("big")              # when a router returns the label "big"
    @listen(or_(a, b))          # when the first of them completes (once; a router label it names re-arms it)
    @listen(and_(a, b))         # when both have (since it last ran)

A condition names methods by the method itself or its name, and router labels by their text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])
ROLE = "__flow_role__"  # on a decorated method: 'start', 'listen' or 'router'
WHEN = "__flow_when__"  # on a decorated method: its Condition (None for a plain start)


class Condition:
    """Triggers combined with 'or' (any of them) or 'and' (all of them)."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: str, items: tuple[Any, ...]) -> None:
        if not items:
            raise ValueError(f"{kind}_() needs at least one method or label")
        self.kind = kind
        self.items: tuple[str | Condition, ...] = tuple(_item(i) for i in items)

    def names(self) -> set[str]:
        """Every method name and label in the condition."""
        out: set[str] = set()
        for i in self.items:
            out |= i.names() if isinstance(i, Condition) else {i}
        return out

    def met(self, seen: set[str]) -> bool:
        """Whether the triggers in `seen` satisfy it."""
        test = any if self.kind == "or" else all
        return test(i.met(seen) if isinstance(i, Condition) else i in seen for i in self.items)

    def __repr__(self) -> str:
        return f"{self.kind}_({', '.join(map(repr, self.items))})"


def _item(x: Any) -> str | Condition:
    if isinstance(x, (str, Condition)):
        return x
    name = getattr(x, "__name__", None)
    if callable(x) and isinstance(name, str):
        return name
    raise TypeError(f"a flow condition names methods or labels (a method, its name, or a label), got {x!r:.80}")


def or_(*items: Any) -> Condition:
    """Met when any of `items` (methods, labels, conditions) has happened."""
    return Condition("or", items)


def and_(*items: Any) -> Condition:
    """Met when all of `items` have happened (since the listener last ran)."""
    return Condition("and", items)


def _mark(role: str, when: Any) -> Callable[[_F], _F]:
    condition = None if when is None else when if isinstance(when, Condition) else Condition("or", (when,))

    def decorate(fn: _F) -> _F:
        if not callable(fn):
            raise TypeError(f"@{role}() decorates a method")
        setattr(fn, ROLE, role)
        setattr(fn, WHEN, condition)
        return fn

    return decorate


def start(condition: Any = None) -> Callable[[_F], _F]:
    """A method that runs when the flow starts (or, given a condition, also when it is met)."""
    return _mark("start", condition)


def listen(condition: Any) -> Callable[[_F], _F]:
    """A method that runs when `condition` is met; it is given the output of the method that met it, if it takes
    an argument."""
    return _mark("listen", condition)


def router(condition: Any) -> Callable[[_F], _F]:
    """A method that runs when `condition` is met and returns a label: the listeners of that label run next."""
    return _mark("router", condition)


__all__ = ["Condition", "and_", "listen", "or_", "router", "start"]
