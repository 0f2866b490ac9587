"""The run's events, under their documented path: see `chatagent.run.events`."""

from chatagent.run.events import (
    KINDS,
    Callbacks,
    Event,
    add_global_callback,
    deliver,
    emit,
    handlers,
    remove_global_callback,
)

__all__ = [
    "Callbacks",
    "Event",
    "KINDS",
    "add_global_callback",
    "deliver",
    "emit",
    "handlers",
    "remove_global_callback",
]
