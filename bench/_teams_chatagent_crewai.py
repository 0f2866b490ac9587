"""chatagent.crewai's side of bench/teams.py: CrewAI's own adapter (bench/_teams_crewai.py) with its imports renamed
from `crewai` to `chatagent.crewai`, run on chatagent: what a CrewAI program costs after the rename."""

from __future__ import annotations

from pathlib import Path

from chatagent import __version__

_SOURCE = (Path(__file__).with_name("_teams_crewai.py")).read_text(encoding="utf-8")
_RENAMED = _SOURCE.replace("from crewai", "from chatagent.crewai").replace(
    "return f\"crewai {metadata.version('crewai')}\"", f'return "chatagent.crewai (chatagent {__version__})"'
)
if _RENAMED.count("chatagent.crewai") < 4:
    raise RuntimeError("bench/_teams_crewai.py changed: its imports are no longer renamed here")
exec(compile(_RENAMED, str(Path(__file__).with_name("_teams_crewai.py")), "exec"), globals())  # noqa: S102
