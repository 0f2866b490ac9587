"""A DBOS worker process for the scale tests (tests/scale/): chatagent's Workers with a tool-calling agent, a crew,
a flow and a task, each of which writes what it does to a ledger and can be made to block mid-way, so that the
test kills the process there (SIGKILL) and watches another worker recover the job.

    python tests/support/worker_child.py STORE_URL DBOS_SCHEMA MODEL_URL DIR [EXECUTOR_ID]

($WORKER_PER_PRINCIPAL, if set, is its queue's `per_principal`; $WORKER_CONCURRENCY its `concurrency`, $WORKER_RATE
(N/SECONDS) its `rate`.)

DIR/hang (read at each place, so that a test sets it for the workers already running) names where to block (forever, after the ledger line is written, and only the first time any worker gets
there): `record:N` inside the tool call record(N), `flow:METHOD` inside a flow method, `task:ITEM` inside the task
on ITEM, `-` nowhere. Every line of
the ledger is `what key`, written once per key (an effect that must happen once) and, in LEDGER.attempts,
every time it runs (LEDGER is DIR/ledger). Prints JSON lines: {"ready": executor id} once it takes jobs, {"blocked": where} when it
blocks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import openai  # noqa: E402, F401  (a worker is warm before its first job: the model client's SDK loaded)

from chatagent import Assistant, Flow, FnCallAgent, LongTermMemory, listen, start, tool  # noqa: E402
from chatagent.crewai.flow import Flow as CrewFlow  # noqa: E402
from chatagent.crewai.flow import human_feedback  # noqa: E402
from chatagent.rag.backends import PostgresBackend  # noqa: E402
from chatagent.run.context import current_run  # noqa: E402
from chatagent.tools.tool import BaseTool  # noqa: E402
from chatagent.workers import QueueLimits, Workers  # noqa: E402
from chatagent.workers.batch import ingest_into  # noqa: E402
from tests.support.workers import make_crew, model  # noqa: E402

STORE, SCHEMA, MODEL_URL, DIR = sys.argv[1:5]
EXECUTOR = sys.argv[5] if len(sys.argv) > 5 else None
LEDGER = os.path.join(DIR, "ledger")
PER_PRINCIPAL = int(os.environ["WORKER_PER_PRINCIPAL"]) if os.environ.get("WORKER_PER_PRINCIPAL") else None
CONCURRENCY = int(os.environ["WORKER_CONCURRENCY"]) if os.environ.get("WORKER_CONCURRENCY") else None
_RATE = os.environ.get("WORKER_RATE", "").partition("/")
RATE = (int(_RATE[0]), float(_RATE[2])) if _RATE[2] else None


def say(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def effect(what: str, key: str) -> None:
    """Write `what key` to the ledger once per key, and to LEDGER.attempts every time."""
    with open(LEDGER + ".attempts", "a") as f:
        f.write(f"{what} {key}\n")
    seen = Path(LEDGER).read_text().splitlines() if os.path.exists(LEDGER) else []
    if f"{what} {key}" not in seen:
        with open(LEDGER, "a") as f:
            f.write(f"{what} {key}\n")
            f.flush()
            os.fsync(f.fileno())


def block_if(where: str) -> None:
    """Block forever at `where` if DIR/hang names it, the first time any worker gets there (the one that recovers the
    job goes on)."""
    hang = Path(DIR, "hang")
    if not hang.exists() or hang.read_text().strip() != where:
        return
    try:
        os.close(os.open(f"{LEDGER}.blocked-{where}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    say({"blocked": where})
    while True:
        time.sleep(1)


def record(n: int) -> str:
    """Record the number n in the ledger."""
    effect(f"record:{n}", current_run().idempotency_key)
    block_if(f"record:{n}")
    return f"recorded {n}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    effect(f"refund:{order}", current_run().idempotency_key)
    return f"order {order} refunded"


class RunCode(BaseTool):
    """A tool that runs the code the model wrote (here: writes it to the ledger), as the code interpreter does:
    where code needs approval (a served job), it waits for a person."""

    name = "run_code"
    description = "Run Python code."
    parameters = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    runs_code = True

    def call(self, params, **kwargs):  # type: ignore[no-untyped-def]
        effect("code", str(self.parse_params(params)["code"]))
        return "ran"


class Trip(Flow):
    @start()
    def plan(self) -> str:
        effect("flow:plan", self.id)
        block_if("flow:plan")
        return f"plan for {self.state['city']}"

    @listen(plan)
    def book(self, plan: str) -> str:
        effect("flow:book", self.id)
        block_if("flow:book")
        return f"booked: {plan}"

    @listen(book)
    def confirm(self, booked: str) -> str:
        effect("flow:confirm", self.id)
        return f"confirmed ({booked})"


class Review(Flow):
    """A flow that asks a person (`Flow.ask`) between its first and its last method."""

    @start()
    def draft(self) -> str:
        effect("review:draft", self.id)
        return f"draft on {self.state['topic']}"

    @listen(draft)
    def approve(self, draft: str) -> str:
        verdict = self.ask(f"Publish the {draft}?")  # (nothing before it has an effect: it runs again on resume)
        effect("review:approve", self.id)
        return f"{draft}, {verdict}"

    @listen(approve)
    def publish(self, approved: str) -> str:
        effect("review:publish", self.id)
        return f"published ({approved})"


class Announce(CrewFlow):
    """CrewAI's flow whose method's output a person reviews (`@human_feedback`) before it goes on."""

    @start()
    def write(self) -> str:
        effect("announce:write", self.id)
        return f"announcement of {self.state['topic']}"

    @human_feedback(message="Is the announcement right?")
    @listen(write)
    def check(self, text: str) -> str:
        effect("announce:check", self.id)
        return text.upper()

    @listen(check)
    def send(self, result) -> str:  # type: ignore[no-untyped-def]
        effect("announce:send", self.id)
        return f"sent {result.output} ({result.feedback})"


class Hold(Flow):
    """A flow whose one method waits until DIR/gate exists (at most 300 s), unless its inputs say `wait: false`;
    the ledger's attempts then say in which order the holds ended, LEDGER.holds when each started and ended."""

    @start()
    def hold(self) -> str:
        with open(LEDGER + ".holds", "a") as f:  # when each hold starts and ends, in the order they did
            f.write(f"start {self.state['label']}\n")
        end = time.monotonic() + 300
        while self.state.get("wait", True) and not Path(DIR, "gate").exists() and time.monotonic() < end:
            time.sleep(0.05)
        with open(LEDGER + ".holds", "a") as f:
            f.write(f"end {self.state['label']}\n")
        effect("hold", self.state["label"])
        return self.state["label"]


def square(item: dict) -> dict:
    """A task: the square of item['n'] (written to the ledger once per item)."""
    effect("task", str(item["n"]))
    block_if(f"task:{item['n']}")
    return {"n": item["n"], "square": item["n"] ** 2}


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    agent = FnCallAgent(function_list=[record, refund], llm=model(MODEL_URL), name="recorder")
    crew = make_crew(MODEL_URL)
    coder = FnCallAgent(function_list=[RunCode()], llm=model(MODEL_URL), name="coder")
    memory = LongTermMemory(store=f"sqlite:///{DIR}/memory.db", embedder=None)  # each principal's, in one store
    rememberer = Assistant(llm=model(MODEL_URL), memory=memory, name="rememberer")
    inner = FnCallAgent(llm=model(MODEL_URL), name="inner")
    outer = FnCallAgent(function_list=[inner.as_tool("ask_inner", "Ask the inner agent.")], llm=model(MODEL_URL),
                        name="outer")  # fmt: skip
    agents = {"recorder": agent, "crew": crew.as_agent(), "coder": coder, "rememberer": rememberer, "outer": outer}
    workers = Workers(
        STORE, agents=agents, flows={"trip": Trip, "review": Review, "announce": Announce, "hold": Hold},
        tasks={"square": square, "ingest": ingest_into(PostgresBackend(STORE, table="passages", embedder=None))},
        queues=[QueueLimits("chatagent", CONCURRENCY, worker_concurrency=min(4, CONCURRENCY or 4), rate=RATE, polling=0.2,
                           per_principal=PER_PRINCIPAL)],
        executor_id=EXECUTOR,
        dbos_schema=SCHEMA, recovery_interval=0.3, grace=20,
    )  # fmt: skip
    workers.launch()
    say({"ready": workers.executor_id})
    try:
        workers.serve_forever()
    finally:
        say({"stopped": workers.executor_id})


if __name__ == "__main__":
    main()
