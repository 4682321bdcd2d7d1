"""Telling a pasted stand-in for a secret from a real one, so that a copied
`.env.example` fails the start-up check instead of reaching Slack or Together."""

from __future__ import annotations

__all__ = ["is_placeholder"]


def is_placeholder(value: str) -> bool:
    """Whether a secret is a stand-in such as `.env.example`'s `xoxb-...` rather
    than a real value: no Slack token, signing secret or API key contains an
    ellipsis or angle brackets, or is a bare token prefix."""
    text = value.strip()
    return (
        "..." in text
        or "…" in text
        or (text.startswith("<") and text.endswith(">"))
        or text in ("xoxb-", "xapp-")
    )
