"""CrewAI projects through the documented commands, each in a fresh directory and its own process, on the
loopback model: `chatagent create crew|flow NAME`, `chatagent run`, `flow kickoff|plot`, `log-tasks-outputs`,
`replay -t ID`, `reset-memories`; and a crew whose memory and knowledge, kept by one process, serve another."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from tests.support import processes

TIMEOUT = 240


def _env(server, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CREWAI_", "MODEL"))}
    env.update(MODEL="openai/test-model", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="EMPTY",
               HOME=str(home), CHATAGENT_EMBEDDER="none")  # fmt: skip
    return env


def _chatagent(args: list[str], cwd: Path, env: dict[str, str]):
    return processes.run([sys.executable, "-m", "chatagent", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=TIMEOUT)  # fmt: skip


def test_a_scaffolded_crew_project_runs_replays_and_forgets(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    made = _chatagent(["create", "crew", "Latest News"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "latest_news"
    assert (project / "src" / "latest_news" / "config" / "agents.yaml").is_file()
    assert "from chatagent.crewai.project import CrewBase" in (project / "src/latest_news/crew.py").read_text()
    (project / ".env").write_text("MODEL=openai/not-this-one\n")  # the environment's MODEL wins over .env
    # rules match in order: the report's request holds the research task's text too (as its context)
    protocol_server.rules.append({"contains": ["expand each topic", "- small models"], "say": "# LLM report"})
    protocol_server.rules.append({"contains": ["Conduct a thorough research about AI LLMs"], "say": "- small models"})
    ran = _chatagent(["run"], project, env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "# LLM report" in ran.stdout
    assert (project / "report.md").read_text() == "# LLM report"  # the reporting task's output_file
    assert {r.json["model"] for r in protocol_server.chat_requests} == {"test-model"}

    listed = _chatagent(["log-tasks-outputs"], project, env)
    assert listed.returncode == 0 and "Task 2:" in listed.stdout, listed.stderr
    second_id = listed.stdout.split("Task 2: ")[1].split()[0]
    before = len(protocol_server.chat_requests)
    protocol_server.rules.insert(0, {"contains": ["expand each topic"], "say": "# LLM report, again"})
    replayed = _chatagent(["replay", "-t", second_id], project, env)
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert len(protocol_server.chat_requests) == before + 1  # only the second task ran again
    assert (project / "report.md").read_text() == "# LLM report, again"

    reset = _chatagent(["reset-memories", "-a"], project, env)
    assert reset.returncode == 0, reset.stderr[-2000:]
    gone = _chatagent(["replay", "-t", second_id], project, env)
    assert gone.returncode != 0 and "no kickoff of a crew is stored" in gone.stderr


def test_a_scaffolded_flow_project_kicks_off_and_plots(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    assert _chatagent(["create", "flow", "poems"], tmp_path, env).returncode == 0
    project = tmp_path / "poems"
    protocol_server.rules.append({"contains": ["Write a poem about how CrewAI is awesome", "3"], "say": "A. B. C."})
    ran = _chatagent(["flow", "kickoff"], project, env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (project / "poem.txt").read_text() == "A. B. C."
    plotted = _chatagent(["flow", "plot"], project, env)
    assert plotted.returncode == 0, plotted.stderr[-2000:]
    page = Path(plotted.stdout.strip().splitlines()[-1])
    page = page if page.is_absolute() else project / page
    assert page.is_file() and "generate_poem" in page.read_text()


def test_the_project_commands_refuse_clearly(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    outside = _chatagent(["run"], tmp_path, env)
    assert outside.returncode == 2 and "no project here" in outside.stderr
    assert _chatagent(["create", "crew", "one"], tmp_path, env).returncode == 0
    again = _chatagent(["create", "crew", "one"], tmp_path, env)
    assert again.returncode == 2 and "exists already" in again.stderr
    bad = _chatagent(["create", "crew", "9lives"], tmp_path, env)
    assert bad.returncode == 2 and "no valid project name" in bad.stderr


CREW_WITH_MEMORY = textwrap.dedent(
    """
    import sys
    from chatagent.crewai import LLM, Agent, Crew, Task
    from chatagent.crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource

    server, topic = sys.argv[1], sys.argv[2]
    llm = LLM(model="openai/test-model", base_url=server, api_key="EMPTY")
    embedder = {"provider": "openai", "config": {"model": "text-embedding-3-small", "api_key": "EMPTY",
                                                 "api_base": server}}
    facts = StringKnowledgeSource(content="The ferry to Tobermory leaves from pier four.")
    clerk = Agent(role="Clerk", goal="Answer travellers", backstory="Knows the harbour.", llm=llm)
    task = Task(description="Answer the traveller about {topic}.", expected_output="One line.", agent=clerk)
    crew = Crew(agents=[clerk], tasks=[task], memory=True, knowledge_sources=[facts], embedder=embedder)
    print(crew.kickoff(inputs={"topic": topic}).raw)
    """
)


def test_memory_and_knowledge_of_a_crew_serve_a_second_process(protocol_server, tmp_path):
    env = _env(protocol_server, tmp_path)
    env["CREWAI_STORAGE_DIR"] = str(tmp_path / "storage")
    script = tmp_path / "crew.py"
    script.write_text(CREW_WITH_MEMORY)
    protocol_server.rules.append({"contains": ["the ferry to Tobermory"], "say": "Pier four; the 9:40 ferry is full."})
    first = processes.run([sys.executable, str(script), protocol_server.base_url, "the ferry to Tobermory"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    asked = protocol_server.chat_requests[-1].json["messages"][-1]["content"]
    assert 'source="knowledge"' in asked and "pier four" in asked  # the crew's knowledge, marked as data
    protocol_server.rules.insert(0, {"contains": ["the return trip", "9:40 ferry is full"], "say": "Take the 11:10."})
    second = processes.run([sys.executable, str(script), protocol_server.base_url, "the return trip by ferry"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.strip() == "Take the 11:10."  # the first process's answer, recalled from the crew's memory
    asked = protocol_server.chat_requests[-1].json["messages"][-1]["content"]
    assert 'source="memory"' in asked
    stored = json.loads((tmp_path / "storage" / "latest_kickoff_task_outputs.json").read_text())
    assert stored["inputs"] == {"topic": "the return trip by ferry"}
