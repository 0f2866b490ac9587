"""FlowState: the base of a flow's typed state, a pydantic model with an `id` (a new random one by default)."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, Field


class FlowState(BaseModel):
    """Subclass it with your fields: `class MyState(FlowState): count: int = 0`, then `class MyFlow(Flow[MyState])`."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)


__all__ = ["FlowState"]
