"""Teams of agents: handoffs between agents (`handoffs`), tasks and crews (`task`, `crew`, `delegation`)."""
