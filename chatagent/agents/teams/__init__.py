"""Teams of agents: tasks and crews (`task`, `task_run`, `delegation`, `crew`); handoffs between agents are the run's
(`chatagent.run.handoffs`)."""
