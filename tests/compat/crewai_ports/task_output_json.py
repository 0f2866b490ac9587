"""CrewAI's docs (tasks.mdx, "Using output_json"): the answer kept as a dict."""

import json

from pydantic import BaseModel

from chatagent.crewai import LLM, Agent, Crew, Task

SOURCE = "docs/en/concepts/tasks.mdx"
MODEL = [{"say": '{"name": "Ada", "age": 36}'}]


class Person(BaseModel):
    name: str
    age: int


def main(server: str, workdir: str) -> None:
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    clerk = Agent(role="Clerk", goal="Record people", backstory="Precise.", llm=llm)
    task = Task(
        description="Record Ada, aged 36.", expected_output="The person as JSON.", agent=clerk, output_json=Person
    )
    result = Crew(agents=[clerk], tasks=[task]).kickoff()
    assert result.json_dict == {"name": "Ada", "age": 36}, result.json_dict
    assert json.loads(result.json) == {"name": "Ada", "age": 36}
    assert result["age"] == 36
    assert result.tasks_output[0].output_format == "json"


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
