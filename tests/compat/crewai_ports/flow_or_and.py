"""CrewAI's docs (flows.mdx, "Conditional Logic: or_ / and_"): or_ runs once, on the first; and_ waits for both."""

from chatagent.crewai.flow.flow import Flow, and_, listen, or_, start

SOURCE = "docs/en/concepts/flows.mdx"
RUNS = []


class LogicFlow(Flow):
    @start()
    def start_method(self):
        return "Hello from the start method"

    @listen(start_method)
    def second_method(self):
        return "Hello from the second method"

    @listen(or_(start_method, second_method))
    def logger(self, result):
        RUNS.append(("or", result))

    @listen(and_(start_method, second_method))
    def both(self):
        RUNS.append(("and", None))
        return "both done"


def main(server: str, workdir: str) -> None:
    LogicFlow().kickoff()
    assert RUNS.count(("and", None)) == 1, RUNS
    assert [r for r in RUNS if r[0] == "or"] == [("or", "Hello from the start method")], RUNS


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
