"""CrewAI's docs (flows.mdx, "Structured State Management"): a plain pydantic model as the state (its id added)."""

from pydantic import BaseModel

from chatagent.crewai.flow.flow import Flow, listen, start

SOURCE = "docs/en/concepts/flows.mdx"


class ExampleState(BaseModel):
    counter: int = 0
    message: str = ""


class StateExampleFlow(Flow[ExampleState]):
    @start()
    def first_method(self):
        self.state.message = "Hello from first_method"
        self.state.counter += 1

    @listen(first_method)
    def second_method(self):
        self.state.message += " - updated by second_method"
        self.state.counter += 1
        return self.state.message


def main(server: str, workdir: str) -> None:
    flow = StateExampleFlow()
    result = flow.kickoff(inputs={"counter": 10})
    assert result == "Hello from first_method - updated by second_method", result
    assert flow.state.counter == 12
    assert isinstance(flow.state, ExampleState) and isinstance(flow.state.id, str) and flow.state.id


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
