"""What a failed read from W&B means, as one `WandbError` with words for people."""

from __future__ import annotations

from typing import Literal

WandbErrorKind = Literal[
    "unreachable", "auth", "not_found", "graphql", "bad_response", "budget", "not_configured"
]

USER_MESSAGES: dict[str, str] = {
    "unreachable": "W&B did not answer in time.",
    "auth": "W&B refused the bot's API key: your operator can set a working one.",
    "not_found": "W&B has no such run",
    "graphql": "W&B refused the query",
    "bad_response": "W&B sent an answer the bot could not read.",
    "budget": "The bot's W&B request budget for this minute is spent; try again in a minute.",
    "not_configured": "W&B is not set up for this bot (your operator can add a W&B API key).",
}

#: W&B's own words are shown bounded: they are untrusted text
MAX_DETAIL = 200


class WandbError(Exception):
    def __init__(self, kind: WandbErrorKind, detail: str = "", *, status: int | None = None):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind: WandbErrorKind = kind
        self.detail = detail[:MAX_DETAIL]
        self.status = status

    @property
    def user_message(self) -> str:
        """One sentence for the person who asked; W&B's words only where they help."""
        base = USER_MESSAGES[self.kind]
        if self.kind in ("not_found", "graphql") and self.detail:
            return f"{base}: {self.detail}."
        return base if base.endswith(".") else base + "."
