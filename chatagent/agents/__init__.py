"""The agents, one per module."""
