"""rl-bot: Slack chat-ops for RL training sessions on Together's API."""

__version__ = "0.1.0"
