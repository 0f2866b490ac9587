"""Qwen models through DashScope's native API (the `dashscope` SDK), by job: `chat` (`DashScopeModel`, the backend)
and `reply` (the service's answers and errors read into fragments)."""
