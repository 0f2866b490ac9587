"""CrewAI's docs (event-listener.mdx): a BaseEventListener that hears the crew, its tasks and its tool calls."""

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.events import (
    BaseEventListener,
    CrewKickoffCompletedEvent,
    CrewKickoffStartedEvent,
    TaskCompletedEvent,
    ToolUsageFinishedEvent,
    crewai_event_bus,
)
from chatagent.crewai.tools import tool

SOURCE = "docs/en/concepts/event-listener.mdx"
MODEL = [{"call": [["lookup_price", {"item": "tea"}]]}, {"say": "Tea costs 3 euros."}]
HEARD = []


@tool("lookup_price")
def lookup_price(item: str) -> str:
    """The price of an item in euros."""
    return "3"


class MyCustomListener(BaseEventListener):
    def setup_listeners(self, crewai_event_bus):
        @crewai_event_bus.on(CrewKickoffStartedEvent)
        def on_crew_started(source, event):
            HEARD.append(("started", event.crew_name))

        @crewai_event_bus.on(TaskCompletedEvent)
        def on_task_completed(source, event):
            HEARD.append(("task", event.output.raw))

        @crewai_event_bus.on(ToolUsageFinishedEvent)
        def on_tool(source, event):
            HEARD.append(("tool", event.tool_name))

        @crewai_event_bus.on(CrewKickoffCompletedEvent)
        def on_crew_completed(source, event):
            HEARD.append(("completed", event.output.raw))


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    with crewai_event_bus.scoped_handlers():
        MyCustomListener()
        clerk = Agent(role="Clerk", goal="Know prices", backstory="Works in a shop.", tools=[lookup_price], llm=llm)
        task = Task(description="How much is tea?", expected_output="The price.", agent=clerk)
        Crew(agents=[clerk], tasks=[task], name="shop").kickoff()
        crewai_event_bus.flush()
    assert ("started", "shop") in HEARD, HEARD
    assert ("tool", "lookup_price") in HEARD, HEARD
    assert ("task", "Tea costs 3 euros.") in HEARD, HEARD
    assert HEARD[-1] == ("completed", "Tea costs 3 euros."), HEARD


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
