"""CrewAI's docs (flows.mdx, "Router"): a router's label picks the listener that runs."""

from pydantic import BaseModel

from chatagent.crewai.flow.flow import Flow, listen, router, start

SOURCE = "docs/en/concepts/flows.mdx"


class RouterState(BaseModel):
    success_flag: bool = False
    path: list = []


class RouterFlow(Flow[RouterState]):
    @start()
    def start_method(self):
        self.state.path.append("start")
        self.state.success_flag = True

    @router(start_method)
    def second_method(self):
        return "success" if self.state.success_flag else "failed"

    @listen("success")
    def third_method(self):
        self.state.path.append("success")
        return "went the success way"

    @listen("failed")
    def fourth_method(self):
        self.state.path.append("failed")
        return "went the failed way"


def main(server: str, workdir: str) -> None:
    flow = RouterFlow()
    assert flow.kickoff() == "went the success way"
    assert flow.state.path == ["start", "success"], flow.state.path


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
