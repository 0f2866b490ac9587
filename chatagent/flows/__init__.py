"""Flows: event-driven processes of methods whose state is persisted after every method (see `flow`)."""
