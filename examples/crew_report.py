"""A two-task crew over a document: an analyst pulls out the facts, a writer turns them into a short brief.

    python examples/crew_report.py [path/to/document.txt]

Without a path it reads a short built-in report. The crew streams: a progress line per task, then each
agent's answer under its name. The model comes from the environment (see examples/basic_chat.py): with no key
it is the embedded local model.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chatagent import BasicAgent, Crew, Task

REPORT = """Quarterly report, river transport.
Barge traffic on the Rhine rose 8% in the third quarter, after low water had cut it by 12% in the spring.
Fuel costs fell 5%. Two new container terminals opened in Duisburg. The main risk is another dry summer."""


def main() -> None:
    text = Path(sys.argv[1]).read_text(encoding="utf-8") if len(sys.argv) > 1 else REPORT
    analyst = BasicAgent(llm=None, name="analyst", system_message="You extract facts precisely.")
    writer = BasicAgent(llm=None, name="writer", system_message="You write short, clear briefs.")
    facts = Task("List the key facts and figures in this document:\n\n{document}", "a short list of facts",
                 agent=analyst)  # fmt: skip
    brief = Task("Write a brief for a manager from the facts", "three sentences", agent=writer, context=[facts])
    crew = Crew(agents=[analyst, writer], tasks=[facts, brief])
    speaker, index = None, -1
    for fragments in crew.run({"document": text}, delta_stream=True):
        for f in fragments:
            if f["index"] != index:
                index = f["index"]
                speaker = f.get("name")
                print(f"\n{speaker}: ", end="", flush=True)
            if f.get("content"):
                print(f["content"], end="", flush=True)
    print()


if __name__ == "__main__":
    main()
