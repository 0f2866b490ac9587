"""Google Gemini natively: the Generative Language API, and Vertex AI as a base URL: the request (`request`), the
reply (`reply`), the backend (`model`, `GeminiModel`, registered as model_type 'gemini')."""
