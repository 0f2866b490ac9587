"""CrewAI's docs (tools.mdx, "Subclassing BaseTool"): a tool class with an args_schema."""

from pydantic import BaseModel, Field

from chatagent.crewai import LLM, Agent, Crew, Task
from chatagent.crewai.tools import BaseTool

SOURCE = "docs/en/concepts/tools.mdx"
MODEL = [{"call": [["weather_lookup", {"city": "Oslo"}]]}]
RULES = [("contains", ["Oslo: 4 degrees, rain"], "It is 4 degrees and raining in Oslo.")]


class WeatherInput(BaseModel):
    city: str = Field(..., description="The city to look up.")


class WeatherTool(BaseTool):
    name: str = "Weather Lookup"
    description: str = "The current weather in a city."
    args_schema: type[BaseModel] = WeatherInput

    def _run(self, city: str) -> str:
        return f"{city}: 4 degrees, rain"


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    forecaster = Agent(
        role="Forecaster", goal="Report the weather", backstory="Reads instruments.", tools=[WeatherTool()], llm=llm
    )
    task = Task(description="What is the weather in Oslo?", expected_output="One sentence.", agent=forecaster)
    result = Crew(agents=[forecaster], tasks=[task]).kickoff()
    assert result.raw == "It is 4 degrees and raining in Oslo.", result.raw
    assert WeatherTool().run(city="Rome") == "Rome: 4 degrees, rain"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
