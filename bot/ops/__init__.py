"""Operating the bot: JSON logs, Prometheus metrics, fault injection for tests, Retry-After."""
