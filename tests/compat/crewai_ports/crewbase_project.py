"""CrewAI's crew template (templates/crew: crew.py, config/agents.yaml, config/tasks.yaml): a @CrewBase class."""

import os

from chatagent.crewai import LLM, Agent, Crew, Process, Task
from chatagent.crewai.agents.agent_builder.base_agent import BaseAgent
from chatagent.crewai.project import CrewBase, after_kickoff, agent, before_kickoff, crew, task

SOURCE = "lib/crewai/src/crewai/cli/templates/crew"
RULES = [
    ("contains", ["Review the context you got", "Agents use tools"], "# Report\nAgents plan and use tools."),
    ("contains", ["Conduct a thorough research about AI agents"], "- Agents plan\n- Agents use tools"),
]
AGENTS = """researcher:
  role: >
    {topic} Senior Data Researcher
  goal: >
    Uncover cutting-edge developments in {topic}
  backstory: >
    You're a seasoned researcher.
reporting_analyst:
  role: >
    {topic} Reporting Analyst
  goal: >
    Create detailed reports
  backstory: >
    You're a meticulous analyst.
"""
TASKS = """research_task:
  description: >
    Conduct a thorough research about {topic}
  expected_output: >
    A list with 2 bullet points
  agent: researcher
reporting_task:
  description: >
    Review the context you got and expand each topic into a full section for a report.
  expected_output: >
    A report in markdown
  agent: reporting_analyst
  output_file: report.md
"""


def main(server: str, workdir: str) -> None:
    os.makedirs(os.path.join(workdir, "config"), exist_ok=True)
    for name, text in (("agents.yaml", AGENTS), ("tasks.yaml", TASKS)):
        with open(os.path.join(workdir, "config", name), "w", encoding="utf-8") as f:
            f.write(text)
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    seen = []

    @CrewBase
    class ResearchCrew:
        agents: list[BaseAgent]
        tasks: list[Task]
        agents_config = os.path.join(workdir, "config", "agents.yaml")
        tasks_config = os.path.join(workdir, "config", "tasks.yaml")

        @before_kickoff
        def prepare(self, inputs):
            seen.append("before")
            return inputs

        @after_kickoff
        def finish(self, output):
            seen.append("after")
            return output

        @agent
        def researcher(self) -> Agent:
            return Agent(config=self.agents_config["researcher"], llm=llm, verbose=False)

        @agent
        def reporting_analyst(self) -> Agent:
            return Agent(config=self.agents_config["reporting_analyst"], llm=llm, verbose=False)

        @task
        def research_task(self) -> Task:
            return Task(config=self.tasks_config["research_task"])

        @task
        def reporting_task(self) -> Task:
            return Task(config=self.tasks_config["reporting_task"])

        @crew
        def crew(self) -> Crew:
            return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, verbose=False)

    result = ResearchCrew().crew().kickoff(inputs={"topic": "AI agents"})
    assert result.raw == "# Report\nAgents plan and use tools.", result.raw
    assert seen == ["before", "after"], seen
    assert result.tasks_output[0].agent.strip() == "AI agents Senior Data Researcher", result.tasks_output[0].agent
    with open(os.path.join(workdir, "report.md"), encoding="utf-8") as f:
        assert "Agents plan" in f.read()


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2])
