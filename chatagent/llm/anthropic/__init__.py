"""Anthropic's Messages API, natively: the request (`request`), the reply (`reply`), the backend (`model`,
`AnthropicModel`, registered as model_type 'anthropic')."""
