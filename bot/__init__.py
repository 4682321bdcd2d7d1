"""rl-bot: Slack chat-ops for RL training sessions on Together's API."""

import sys

__version__ = "0.1.0"

# httpx imports its command-line client (click, rich, pygments) whenever those are
# installed, as developer tools install them: megabytes the bot never uses. Without
# this module httpx defines a stub instead, as it does where they are missing.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
