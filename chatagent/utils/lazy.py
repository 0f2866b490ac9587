"""Lazy re-exports: a package names what it exports and where from; the module is imported on first use.
`settle_imports`: what a lazy import leaves the garbage collector, dealt with where it was imported.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` for `package`, whose `exports` map name -> module."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def settle_imports(modules_before: int) -> None:
    """After work that may have imported modules (a model's first build, a shared client's), in its worker thread:
    when `sys.modules` grew past `modules_before`, the collector's two young generations collected here. An import
    leaves thousands of young functions, classes and dicts, and the collector's next pass over them (1.5-2 ms)
    would fall on whichever thread allocates next, mostly the event loop's, in a later agent's step; collected
    once here, they are in the old generation, which the collector seldom visits."""
    if len(sys.modules) > modules_before:
        gc.collect(1)
