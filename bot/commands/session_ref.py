"""How a person names a session in a command: by its id or by its display name,
one word as typed. Pure; `bot.commands.names` resolves a name to its id.

Slack escapes `&`, `<` and `>` in a command's text, so a word that begins with
`<` is one of Slack's own tokens (a mention, a channel, a link), never a name.
"""

from __future__ import annotations

import re

#: the longest display name looked up
MAX_NAME = 200
_REFERENCE_RE = re.compile(r"^[^\s<>\x00-\x1f\x7f\x85\u2028\u2029\u202e\ufeff]{1,200}$")
#: what Slack writes for `&`, `<` and `>` in a command's text
_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def is_session_ref(word: str) -> bool:
    """A session id, or a word that may be a display name: printable, at most
    `MAX_NAME` characters, not one of Slack's tokens."""
    return bool(_REFERENCE_RE.fullmatch(word))


def as_typed(word: str) -> str:
    """The word as the person typed it (Slack's escapes undone), for comparing
    with a display name."""
    for entity, char in _ENTITIES:
        word = word.replace(entity, char)
    return word
