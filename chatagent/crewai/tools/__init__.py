"""`crewai.tools`: BaseTool and `@tool` (see `chatagent.crewai.tools.base_tool`)."""

from chatagent.crewai.tools.base_tool import BaseTool, Tool, tool

__all__ = ["BaseTool", "Tool", "tool"]
