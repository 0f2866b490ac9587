"""A process that runs a flow with its record in a store, for the tests of flows across processes (kill -9, ask).

    python tests/support/flow_child.py STORE_URL LOG kickoff FLOW_ID [kill]   start flow FLOW_ID (kill: SIGKILL
                                                                            itself in its third method, once)
    python tests/support/flow_child.py STORE_URL LOG resume FLOW_ID [FEEDBACK]

Every method appends its name to the file LOG when it runs (so the test sees what ran, and how often). The last
line on stdout is the JSON of what kickoff/resume returned.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatagent import Flow, FlowPaused, FlowState, listen, router, start  # noqa: E402

STORE, LOG, MODE, FLOW_ID = sys.argv[1:5]
EXTRA = sys.argv[5] if len(sys.argv) > 5 else None


def ran(name: str) -> None:
    with open(LOG, "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


class Counts(FlowState):
    items: list[int] = []
    total: int = 0
    approved_by: str = ""


class Billing(Flow[Counts]):
    store = STORE

    @start()
    def fetch(self):
        ran("fetch")
        self.state.items = [3, 4, 5]
        return self.state.items

    @listen(fetch)
    def add(self, items):
        ran("add")
        self.state.total = sum(items)
        return self.state.total

    @router(add)
    def size(self, total):
        ran("size")
        if EXTRA == "kill" and not Path(LOG + ".killed").exists():
            Path(LOG + ".killed").write_text("once")
            os.kill(os.getpid(), signal.SIGKILL)
        return "big" if total > 10 else "small"

    @listen("big")
    def approve(self, total):
        ran("approve")
        who = self.ask(f"Approve a bill of {total}?") if EXTRA == "ask" or MODE == "resume" and EXTRA else "auto"
        self.state.approved_by = who
        return f"billed {total}, approved by {who}"

    @listen("small")
    def skip(self):
        ran("skip")
        return "nothing to bill"


if MODE == "kickoff":
    out = Billing().kickoff(inputs={"id": FLOW_ID})
else:
    out = Billing.resume(FLOW_ID, feedback=EXTRA if EXTRA not in (None, "kill") else None)
if isinstance(out, FlowPaused):
    out = {"paused": out.question, "flow_id": out.flow_id}
print(json.dumps(out))
