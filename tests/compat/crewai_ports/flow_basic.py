"""CrewAI's docs (flows.mdx, "Getting Started"): a start method and a listener, an LLM call inside, dict state."""

from chatagent.crewai import LLM
from chatagent.crewai.flow.flow import Flow, listen, start

SOURCE = "docs/en/concepts/flows.mdx"
RULES = [
    ("contains", ["Return the name of a random city"], "Lisbon"),
    ("contains", ["fun fact about the city Lisbon"], "Lisbon has trams."),
]


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")

    class ExampleFlow(Flow):
        @start()
        def generate_city(self):
            city = llm.call("Return the name of a random city in the world.")
            self.state["city"] = city
            return city

        @listen(generate_city)
        def generate_fun_fact(self, random_city):
            return llm.call(f"Tell me a fun fact about the city {random_city}")

    flow = ExampleFlow()
    result = flow.kickoff()
    assert result == "Lisbon has trams.", result
    assert flow.state["city"] == "Lisbon" and flow.state["id"]


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
