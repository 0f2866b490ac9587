"""`crewai.agents.agent_builder`."""
