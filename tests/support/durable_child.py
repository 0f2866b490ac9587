"""A process that runs a tool-calling agent on a stored session, to be killed with SIGKILL mid-turn (see
tests/sessions/test_durable_turns.py).

    python tests/support/durable_child.py STORE_URL SESSION_ID MODEL_URL LEDGER HANG_IN (run TEXT | resume)

The agent's tool `record(n)` writes one line to LEDGER per call it has not seen before, keyed by the call's
idempotency key, and one line to LEDGER.attempts every time it runs; with HANG_IN = n (0: never) it blocks
forever inside the call `record(n)`, after its write (HANG_IN = n@FILE: until FILE exists, then it returns). Progress goes to stdout as JSON lines: {"text": ...} as the answer streams,
{"in_tool": n} when it blocks, {"done": response} at the end, {"error": ...} on failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatagent import FnCallAgent, Session  # noqa: E402
from chatagent.run.context import current_run  # noqa: E402


def say(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def main() -> None:
    store, session_id, model_url, ledger, hang, mode = sys.argv[1:7]
    text = sys.argv[7] if mode == "run" else ""
    hang, _, gate = hang.partition("@")
    hang_in = int(hang) or None

    def record(n: int) -> str:
        """Record the number n in the ledger."""
        key = current_run().idempotency_key
        with open(ledger + ".attempts", "a") as f:
            f.write(f"{key} {n}\n")
        seen = Path(ledger).read_text().split() if os.path.exists(ledger) else []
        if key not in seen:
            with open(ledger, "a") as f:
                f.write(f"{key} {n}\n")
                f.flush()
                os.fsync(f.fileno())
        if n == hang_in:
            say({"in_tool": n})
            while not (gate and os.path.exists(gate)):
                time.sleep(0.05 if gate else 1)
        return f"recorded {n}"

    llm = {"model": "m", "model_server": model_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}
    agent = FnCallAgent(function_list=[record], llm=llm, name="recorder")
    session = Session(session_id, store)
    try:
        if mode == "run":
            run = agent.run([{"role": "user", "content": text}], session=session)
        else:
            run = agent.resume(session=session)
        response: list = []
        for response in run:
            last = response[-1]
            if last.get("role") == "assistant" and last.get("content"):
                say({"text": last["content"]})
        say({"done": response})
    except Exception as e:
        say({"error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
