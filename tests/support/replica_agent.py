"""The agent the replicas of the load-balancer tests serve (`chatagent serve --agent
tests.support.replica_agent:make`): a tool-calling agent on the loopback model server ($REPLICA_MODEL_URL) whose
tool `note(client)` writes one ledger line per idempotency key ($REPLICA_LEDGER; every run also to .attempts),
and a `refund` tool that needs approval."""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

from chatagent import FnCallAgent, tool
from chatagent.run.context import current_run

if TYPE_CHECKING:
    from chatagent import Assistant


def _append(path: str, line: str, once: bool) -> None:
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # three processes write the ledger
        f.seek(0)
        if once and line in f.read().splitlines():
            return
        f.write(line + "\n")
        f.flush()


def note(client: str) -> str:
    """Note that the client asked."""
    key = current_run().idempotency_key
    ledger = os.environ["REPLICA_LEDGER"]
    _append(ledger + ".attempts", f"{client} {key}", once=False)
    _append(ledger, f"{client} {key}", once=True)
    return f"noted {client}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    _append(os.environ["REPLICA_LEDGER"] + ".refunds", order, once=False)
    return f"order {order} refunded"


def make() -> FnCallAgent:
    llm = {"model": "m", "model_server": os.environ["REPLICA_MODEL_URL"], "api_key": "k",
           "generate_cfg": {"max_retries": 0, "request_timeout": 600}}  # fmt: skip
    return FnCallAgent(function_list=[note, refund], llm=llm, name="replica")


def make_remembering() -> Assistant:
    """An agent with long-term memory in the store $REPLICA_MEMORY_STORE (shared by the replicas): what a principal
    told one replica, another replica recalls for that principal only."""
    from chatagent import Assistant, LongTermMemory

    llm = {"model": "m", "model_server": os.environ["REPLICA_MODEL_URL"], "api_key": "k",
           "generate_cfg": {"max_retries": 0}}  # fmt: skip
    return Assistant(llm=llm, name="remembering", memory=LongTermMemory(store=os.environ["REPLICA_MEMORY_STORE"]))
