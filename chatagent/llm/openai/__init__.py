"""OpenAI's Chat Completions API and every server that speaks it (vLLM, Ollama, llama.cpp, SGLang, DashScope's
compatible mode), by job: `chat` (`OpenAICompatModel`, the backend), `request` (what is sent), `reply` (what comes
back, streamed or whole), `errors` (what a failure means), `azure` (`AzureModel`: Azure OpenAI's deployments)."""
