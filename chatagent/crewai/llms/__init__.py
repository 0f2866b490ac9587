"""`crewai.llms`: the base of custom models (`crewai.llms.base_llm.BaseLLM`)."""
