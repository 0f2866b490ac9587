"""Prompt-based function calling, by job: `formats` (markers, prompts, rendering the conversation), `parser`
(the streaming parser of the reply), `calls` (reading one call's text). The entry point that drives a model
through them is `chatagent.llm.fncall_prompt`."""
