"""Untrusted text, made inert and bounded: the primitives every renderer uses.

Every value that came from Together or from a user goes through `escape` (or
`inert`, which also tidies and cuts), so an API field such as `<!channel>` can
never ping or forge a link, and `truncate` keeps any text inside a limit
without cutting an entity or one of our own `<…>` tokens in half.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
NONE = "—"

# Our own, tighter budgets so one long value cannot crowd out the rest.
NAME_LIMIT = 200
ID_LIMIT = 200
VALUE_LIMIT = 300
ERROR_MESSAGE_LIMIT = 2000
MAX_LINK_URL = 1000

# C0/C1 controls (except \n and \t), bidi overrides that can visually reorder
# an id, and lone surrogates that cannot be sent as UTF-8 are all dropped.
_DROPPED = (
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + list(range(0x7F, 0xA0))
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
    + list(range(0xD800, 0xE000))
)
CLEAN_TABLE: dict[int, str | None] = {c: None for c in _DROPPED}
CLEAN_TABLE.update({0x2028: "\n", 0x2029: "\n"})

_ENTITIES = ("&amp;", "&lt;", "&gt;")
_MENTION_RE = re.compile(r"^<(!subteam\^[A-Z0-9]+|!here|!channel|@[UW][A-Z0-9]+)>$")
_USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_URL_RE = re.compile(r"^https?://[^\s<>|]+$")
TOKEN_RE = re.compile(r"<([^<>]*)>")


def escape(text: str) -> str:
    """Make untrusted text inert in mrkdwn and in the `text` fallback.

    Slack only pings or links through `<…>` tokens, so escaping `&`, `<`, `>`
    is enough to stop `<!channel>` or `<https://x|y>`; control characters are
    dropped because they garble terminals and Slack renders them as junk.
    """
    cleaned = text.translate(CLEAN_TABLE)
    return cleaned.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_len(text: str) -> int:
    """Length in UTF-16 code units: never less than `len`, so it is the safe
    measure whether Slack counts code points or UTF-16 units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _safe_cut(text: str, cut: int) -> int:
    """Move a cut point back so it never splits an entity or a `<…>` token."""
    amp = text.rfind("&", max(0, cut - 4), cut)
    if amp != -1:
        for entity in _ENTITIES:
            if text.startswith(entity, amp) and amp + len(entity) > cut:
                cut = amp
                break
    # Untrusted `<` is always escaped, so a raw `<` opens one of our tokens
    # (`<!date^…>`, a link, a mention); keep it whole or drop it.
    lt = text.rfind("<", 0, cut)
    if lt != -1 and text.find(">", lt, cut) == -1:
        cut = lt
    return cut


def truncate(text: str, limit: int) -> str:
    """Cut to at most `limit` characters, ending in "…".

    Call it after `escape`, so it is the escaped text that fits; it never cuts
    inside `&amp;` or one of our `<…>` tokens, which would leave a stray `&`
    or an unclosed `<` for Slack to misparse.
    """
    if slack_len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    budget = limit - len(ELLIPSIS)
    cut = used = 0
    for char in text:
        width = 2 if ord(char) > 0xFFFF else 1
        if used + width > budget:
            break
        used += width
        cut += 1
    cut = _safe_cut(text, cut)
    return text[:cut].rstrip() + ELLIPSIS


def sentence(text: str) -> str:
    """End with a full stop unless it already ends a sentence."""
    return text if text.endswith((".", "!", "?", ELLIPSIS)) else text + "."


def one_line(text: str) -> str:
    return " ".join(text.split())


def inert(value: object, limit: int, *, default: str = NONE, multiline: bool = False) -> str:
    """Escape, tidy and cut an untrusted value; `default` when nothing is left."""
    if value is None:
        return default
    raw = value if isinstance(value, str) else _num(value)
    cleaned = escape(raw)
    if multiline:
        cleaned = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", cleaned.strip())
    else:
        cleaned = one_line(cleaned)
    return truncate(cleaned, limit) if cleaned else default


def code_span(value: str | None, limit: int) -> str:
    """An untrusted id in a code span; a backtick in it cannot end the span."""
    text = inert(value, limit)
    return text if text == NONE else "`" + text.replace("`", "ˋ") + "`"


def _num(value: object) -> str:
    """str() of a number from the API; huge ints raise in str(), so cap them."""
    if isinstance(value, float):
        return f"{value:g}"
    try:
        return str(value)
    except ValueError:
        return "(too large to show)"


def safe_link(url: str | None, label: str, *, limit: int = MAX_LINK_URL) -> str | None:
    """A `<url|label>` link, only for plain http(s) URLs of at most `limit`
    characters; `label` is ours (or escaped)."""
    if url is None or len(url) > limit or not _URL_RE.fullmatch(url):
        return None
    return f"<{url.replace('&', '&amp;')}|{label}>"


def safe_mention(mention: str | None) -> str:
    """Operator-configured mention passes through only in a known-safe form."""
    if mention is None:
        return ""
    if _MENTION_RE.fullmatch(mention):
        return mention
    return inert(mention, 100, default="")


def user_ref(user_id: str) -> str:
    """A Slack user id as a mention; anything else as inert text (never blank)."""
    if _USER_ID_RE.fullmatch(user_id):
        return f"<@{user_id}>"
    return inert(user_id, 100, default="Someone")


# The `text` fallback (notifications, screen readers) has no `verbatim`: Slack
# links bare URLs and domains in it, and names too under `link_names`. A word
# joiner (U+2060, invisible) after `@`, `#`, the colon of `://` and a dot inside
# a word breaks each of those patterns; our own `<…>` tokens are left alone.
WORD_JOINER = "\u2060"
_AUTOLINK_RE = re.compile(r"(?<=[@#])|(?<=:)(?=//)|(?<=\w\.)(?=\w)")


def defuse(text: str) -> str:
    """Break Slack's autolinking in a `text` fallback, keeping our tokens."""
    parts = TOKEN_RE.split(text)  # odd items are the insides of `<…>` tokens
    return "".join(
        f"<{part}>" if i % 2 else _AUTOLINK_RE.sub(WORD_JOINER, part)
        for i, part in enumerate(parts)
    )
