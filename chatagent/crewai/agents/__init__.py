"""`crewai.agents`: the base of CrewAI's agents (`agent_builder.base_agent.BaseAgent`)."""
