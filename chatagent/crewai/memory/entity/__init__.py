"""`crewai.memory.entity`: entity memory (people, places, organisations and what is known of them)."""
