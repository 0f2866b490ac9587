"""Unknown keyword arguments are an error, never swallowed: the TypeError names the argument and the
closest known one (`GroupChat(agent_selection_metod=...)` -> did you mean 'agent_selection_method'?)."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Iterable
from typing import Any


def unexpected_keyword(where: str, given: Iterable[str], known: Iterable[str]) -> TypeError:
    """The TypeError for the first of `given` (sorted) that `where` does not take, with a close-match hint."""
    name = sorted(given)[0]
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TypeError(f"{where} got an unexpected keyword argument {name!r}{hint}")


def reject_unknown(cls: type, kwargs: dict[str, Any], extra_known: Iterable[str] = ()) -> None:
    """Raise TypeError if `kwargs` is not empty: none of `cls`'s constructors took these."""
    if kwargs:
        raise unexpected_keyword(f"{cls.__name__}()", kwargs, init_parameters(cls) + tuple(extra_known))


@functools.cache
def init_parameters(cls: type) -> tuple[str, ...]:
    """The named parameters of every `__init__` in `cls`'s method resolution order."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        names += [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"]
    return tuple(dict.fromkeys(names))
