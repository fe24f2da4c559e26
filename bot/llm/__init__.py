"""Model adapters: the only place that knows the OpenAI wire formats."""
