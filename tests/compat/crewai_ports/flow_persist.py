"""CrewAI's docs (flows.mdx, "Flow Persistence"): @persist keeps the state; kickoff with its id restores it."""

import os

from pydantic import BaseModel

from chatagent.crewai.flow.flow import Flow, listen, start
from chatagent.crewai.flow.persistence import SQLiteFlowPersistence, persist

SOURCE = "docs/en/concepts/flows.mdx"


class CounterState(BaseModel):
    value: int = 0


def main(server: str, workdir: str) -> None:
    store = SQLiteFlowPersistence(db_path=os.path.join(workdir, "flow_states.db"))

    @persist(store)
    class CounterFlow(Flow[CounterState]):
        @start()
        def increment(self):
            self.state.value += 1
            return self.state.value

        @listen(increment)
        def double(self, value):
            self.state.value = value * 2
            return self.state.value

    first = CounterFlow()
    assert first.kickoff() == 2
    second = CounterFlow()
    assert second.kickoff(inputs={"id": first.state.id}) == 6, second.state
    assert second.state.id == first.state.id


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
