"""A small flow with a router: classify a customer message, then answer it the way its kind needs.

    python examples/flow_router.py "My invoice is wrong, I was charged twice."

The flow's state is saved after every method in the session store (see docs/teams.md), so an interrupted run
goes on with `Support.resume(flow_id)`. The model comes from the environment (see examples/basic_chat.py).
"""

from __future__ import annotations

import sys

from chatagent import BasicAgent, Flow, FlowState, listen, router, start

agent = BasicAgent(llm=None, name="support")


def ask(prompt: str) -> str:
    return agent.run_nonstream([{"role": "user", "content": prompt}])[-1]["content"]


class Ticket(FlowState):
    message: str = ""
    kind: str = ""


class Support(Flow[Ticket]):
    @start()
    def classify(self):
        answer = ask(f"Is this message about billing or something else? Reply with one word.\n\n{self.state.message}")
        self.state.kind = "billing" if "billing" in answer.lower() else "general"
        return self.state.kind

    @router(classify)
    def route(self, kind):
        return kind

    @listen("billing")
    def billing_reply(self):
        return ask(f"Answer this billing question kindly, in two sentences:\n\n{self.state.message}")

    @listen("general")
    def general_reply(self):
        return ask(f"Answer this customer message kindly, in two sentences:\n\n{self.state.message}")


def main() -> None:
    message = " ".join(sys.argv[1:]) or "My invoice is wrong, I was charged twice."
    flow = Support()
    answer = flow.kickoff(inputs={"message": message})
    print(f"kind: {flow.state.kind}")
    print(f"answer: {answer}")
    print(f"flow id: {flow.id}")


if __name__ == "__main__":
    main()
