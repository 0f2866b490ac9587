"""The files of a new project, as `chatagent create crew NAME` and `chatagent create flow NAME` write them: CrewAI's
layout (`src/<name>/main.py`, `crew.py`, `config/agents.yaml`, `config/tasks.yaml`, `tools/`, `knowledge/`),
with `chatagent.crewai` in the imports. `{{name}}` is the folder's name, `{{Class}}` the crew's class."""

from __future__ import annotations

PYPROJECT = """[project]
name = "{{name}}"
version = "0.1.0"
description = "{{title}}: made with chatagent create {{kind}}"
requires-python = ">=3.10"
dependencies = ["chatagent[crewai]"]

[tool.crewai]
type = "{{kind}}"
"""

ENV = """# the model the agents use (an OpenAI-compatible server: set OPENAI_BASE_URL and OPENAI_API_KEY)
MODEL=openai/gpt-4o-mini
"""

README = """# {{title}}

Made with `chatagent create {{kind}} {{name}}`: CrewAI's project layout on chatagent.

    chatagent run                 # in this folder: runs src/{{name}}/main.py
    chatagent replay -t TASK_ID   # again from a task of the last run (chatagent log-tasks-outputs lists them)
    chatagent reset-memories -a   # forget what the crew remembered

Agents are in `src/{{name}}/config/agents.yaml`, tasks in `src/{{name}}/config/tasks.yaml`; the model is `MODEL`
in `.env`.
"""

AGENTS = """researcher:
  role: >
    {topic} Senior Data Researcher
  goal: >
    Uncover cutting-edge developments in {topic}
  backstory: >
    You're a seasoned researcher with a knack for uncovering the latest developments in {topic}.
reporting_analyst:
  role: >
    {topic} Reporting Analyst
  goal: >
    Create detailed reports based on {topic} data analysis and research findings
  backstory: >
    You're a meticulous analyst who turns complex data into clear reports.
"""

TASKS = """research_task:
  description: >
    Conduct a thorough research about {topic}. Make sure you find any interesting and relevant information.
  expected_output: >
    A list with 5 bullet points of the most relevant information about {topic}
  agent: researcher
reporting_task:
  description: >
    Review the context you got and expand each topic into a full section for a report.
  expected_output: >
    A fully fledged report with the main topics, each with a full section of information, in markdown
  agent: reporting_analyst
  output_file: report.md
"""

CREW = '''from chatagent.crewai import Agent, Crew, Process, Task
from chatagent.crewai.agents.agent_builder.base_agent import BaseAgent
from chatagent.crewai.project import CrewBase, agent, crew, task


@CrewBase
class {{Class}}:
    """The {{title}} crew."""

    agents: list[BaseAgent]
    tasks: list[Task]

    @agent
    def researcher(self) -> Agent:
        return Agent(config=self.agents_config["researcher"], verbose=True)

    @agent
    def reporting_analyst(self) -> Agent:
        return Agent(config=self.agents_config["reporting_analyst"], verbose=True)

    @task
    def research_task(self) -> Task:
        return Task(config=self.tasks_config["research_task"])

    @task
    def reporting_task(self) -> Task:
        return Task(config=self.tasks_config["reporting_task"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, verbose=True)
'''

CREW_MAIN = '''import sys
from datetime import datetime

from {{name}}.crew import {{Class}}

INPUTS = {"topic": "AI LLMs", "current_year": str(datetime.now().year)}


def run():
    """Run the crew."""
    result = {{Class}}().crew().kickoff(inputs=INPUTS)
    print(result.raw)


def train():
    """Train the crew: chatagent train -n N -f FILE."""
    {{Class}}().crew().train(n_iterations=int(sys.argv[1]), filename=sys.argv[2], inputs=INPUTS)


def replay():
    """Run the last kickoff again from a task: chatagent replay -t TASK_ID."""
    {{Class}}().crew().replay(task_id=sys.argv[1])


def test():
    """Test the crew: chatagent test -n N -m MODEL."""
    {{Class}}().crew().test(n_iterations=int(sys.argv[1]), eval_llm=sys.argv[2], inputs=INPUTS)


def reset_memories(kind="all"):
    """Forget what the crew remembered: chatagent reset-memories."""
    {{Class}}().crew().reset_memories(command_type=kind)
'''

TOOL = """from pydantic import BaseModel, Field

from chatagent.crewai.tools import BaseTool


class MyCustomToolInput(BaseModel):
    argument: str = Field(..., description="Description of the argument.")


class MyCustomTool(BaseTool):
    name: str = "Name of my tool"
    description: str = "Clear description for what this tool is useful for, your agent will need this information."
    args_schema: type[BaseModel] = MyCustomToolInput

    def _run(self, argument: str) -> str:
        return "this is an example of a tool output, ignore it and move along."
"""

PREFERENCES = """User name is John Doe.
User is an AI Engineer.
User is interested in AI Agents.
"""

FLOW_MAIN = '''from pydantic import BaseModel

from chatagent.crewai.flow.flow import Flow, listen, start

from {{name}}.crews.poem_crew.poem_crew import PoemCrew


class PoemState(BaseModel):
    sentence_count: int = 3
    poem: str = ""


class {{Class}}(Flow[PoemState]):
    @start()
    def generate_sentence_count(self):
        self.state.sentence_count = 3

    @listen(generate_sentence_count)
    def generate_poem(self):
        result = PoemCrew().crew().kickoff(inputs={"sentence_count": self.state.sentence_count})
        self.state.poem = result.raw

    @listen(generate_poem)
    def save_poem(self):
        with open("poem.txt", "w", encoding="utf-8") as f:
            f.write(self.state.poem)
        return self.state.poem


def kickoff():
    """Run the flow: chatagent run, or chatagent flow kickoff."""
    print({{Class}}().kickoff())


def plot():
    """Draw the flow: chatagent flow plot."""
    print({{Class}}().plot())
'''

POEM_AGENTS = """poem_writer:
  role: >
    CrewAI Poem Writer
  goal: >
    Generate a funny, light-hearted poem about how CrewAI is awesome with a sentence count of {sentence_count}
  backstory: >
    You're a creative poet with a talent for capturing the essence of any topic in a beautiful and engaging way.
"""

POEM_TASKS = """write_poem:
  description: >
    Write a poem about how CrewAI is awesome. Ensure the poem is engaging and adheres to the specified sentence
    count of {sentence_count}.
  expected_output: >
    A beautifully crafted poem about CrewAI, with exactly {sentence_count} sentences.
  agent: poem_writer
"""

POEM_CREW = '''from chatagent.crewai import Agent, Crew, Process, Task
from chatagent.crewai.agents.agent_builder.base_agent import BaseAgent
from chatagent.crewai.project import CrewBase, agent, crew, task


@CrewBase
class PoemCrew:
    """The crew that writes the poem."""

    agents: list[BaseAgent]
    tasks: list[Task]

    @agent
    def poem_writer(self) -> Agent:
        return Agent(config=self.agents_config["poem_writer"])

    @task
    def write_poem(self) -> Task:
        return Task(config=self.tasks_config["write_poem"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)
'''


def files(kind: str, name: str, class_name: str, title: str) -> dict[str, str]:
    """Path (relative to the project's folder) -> text, for a new `kind` ('crew' or 'flow') project."""
    src = f"src/{name}"
    common = {"pyproject.toml": PYPROJECT, ".env": ENV, "README.md": README, ".gitignore": ".env\n__pycache__/\n",
              f"{src}/__init__.py": "", f"{src}/tools/__init__.py": "", f"{src}/tools/custom_tool.py": TOOL}  # fmt: skip
    if kind == "crew":
        made = {**common, f"{src}/main.py": CREW_MAIN, f"{src}/crew.py": CREW, f"{src}/config/agents.yaml": AGENTS,
                f"{src}/config/tasks.yaml": TASKS, "knowledge/user_preference.txt": PREFERENCES}  # fmt: skip
    else:
        crew = f"{src}/crews/poem_crew"
        made = {**common, f"{src}/main.py": FLOW_MAIN, f"{src}/crews/__init__.py": "", f"{crew}/__init__.py": "",
                f"{crew}/poem_crew.py": POEM_CREW, f"{crew}/config/agents.yaml": POEM_AGENTS,
                f"{crew}/config/tasks.yaml": POEM_TASKS}  # fmt: skip
    out = {}
    for path, text in made.items():
        for key, value in (("{{name}}", name), ("{{Class}}", class_name), ("{{title}}", title), ("{{kind}}", kind)):
            text = text.replace(key, value)
        out[path] = text
    return out


__all__ = ["files"]
