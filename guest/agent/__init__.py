"""The agent loop: drives a policy (a model behind an OpenAI-compatible endpoint, or a
fixed script) through the tool set, within its budgets, leaving closed records."""
