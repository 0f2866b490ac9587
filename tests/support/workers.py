"""Worker processes for the scale tests: tests/support/worker_child.py (chatagent's DBOS Workers with a recording
agent, a crew, a flow and a task) started, read and killed by the test."""

from __future__ import annotations

from pathlib import Path

from chatagent import Crew, FnCallAgent, Task
from tests.support.line_child import DEADLINE, LineChild

CHILD = Path(__file__).resolve().parent / "worker_child.py"


class Worker(LineChild):
    """One worker process; `ready()` waits until it takes jobs (its executor id), `blocked()` until it blocks
    where DIR/hang says."""

    def __init__(self, store: str, schema: str, model_url: str, directory: Path, executor: str | None = None) -> None:
        super().__init__(CHILD, store, schema, model_url, str(directory), *([executor] if executor else []))
        self.executor: str | None = None

    def wait_for(self, key: str) -> dict:
        while True:
            obj = self.next_line(repr(key))
            if key in obj:
                return obj

    def ready(self) -> str:
        self.executor = self.wait_for("ready")["ready"]
        return self.executor

    def stop(self) -> None:
        """SIGTERM, and wait for the process to end."""
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(DEADLINE)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def model(model_url: str) -> dict:
    return {"model": "m", "model_server": model_url, "api_key": "k", "generate_cfg": {"max_retries": 0}}


def make_crew(model_url: str) -> Crew:
    """The crew the workers serve as "crew" (the test makes the same one to compare with a run in process)."""
    writer = FnCallAgent(llm=model(model_url), name="writer")
    return Crew(agents=[writer], tasks=[Task("Write about {topic}", "a line", agent=writer),
                                        Task("Shorten it", "a shorter line", agent=writer)], name="crew")  # fmt: skip
