"""Slack messages for training sessions: pure functions, no I/O.

Every value that came from Together or from a user goes through `escape`, so
an API field such as `<!channel>` can never ping or forge a link, and every
message stays inside Block Kit's limits whatever the API returns (long names,
huge error messages, hundreds of checkpoints): text is cut with "…" and long
lists end with "and N more". `block_kit_problems` checks those limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.models import (
    Checkpoint,
    Status,
    TrainingCheckpoint,
    TrainingSession,
    is_session_id,
    short_status,
    status_of,
)
from bot.snapshots import checkpoint_count

Message = dict[str, Any]
"""A chat.postMessage payload: "text" (plain fallback, never empty) and "blocks"."""

ELLIPSIS = "…"
NONE = "—"

# Slack's documented Block Kit limits.
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_BUTTON_URL = 3000
MAX_ACTION_ID = 255
MAX_ACTION_ELEMENTS = 25
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 3000
MAX_FALLBACK_TEXT = 40000

# Our own, tighter budgets so one long value cannot crowd out the rest.
_NAME_LIMIT = 200
_ID_LIMIT = 200
_VALUE_LIMIT = 300
_ERROR_MESSAGE_LIMIT = 2000
_FALLBACK_LIMIT = 3000
_LATEST_CHECKPOINTS = 3
_MAX_LIST_ROWS = 100
_MAX_LINK_URL = 1000

SUBSCRIBE = "rl_subscribe"
UNSUBSCRIBE = "rl_unsubscribe"
REFRESH = "rl_refresh"
WANDB = "rl_wandb"
STOP = "rl_stop"
HOME_UNSUBSCRIBE = "rl_home_unsubscribe"
STOPPABLE = frozenset({Status.RUNNING, Status.CREATING})

_STATUS_WORDS = {
    Status.CREATING: "Creating",
    Status.RUNNING: "Running",
    Status.STOPPING: "Stopping",
    Status.STOPPED: "Stopped",
    Status.ERROR: "Error",
    Status.EXPIRED: "Expired",
    Status.UNSPECIFIED: "Unspecified",
}

_STATUS_EMOJI = {
    Status.CREATING: ":hourglass_flowing_sand:",
    Status.RUNNING: ":arrow_forward:",
    Status.STOPPING: ":double_vertical_bar:",
    Status.STOPPED: ":black_square_for_stop:",
    Status.ERROR: ":red_circle:",
    Status.EXPIRED: ":alarm_clock:",
    Status.UNSPECIFIED: ":grey_question:",
    Status.UNKNOWN: ":question:",
}

# C0/C1 controls (except \n and \t), bidi overrides that can visually reorder
# an id, and lone surrogates that cannot be sent as UTF-8 are all dropped.
_DROPPED = (
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + list(range(0x7F, 0xA0))
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
    + list(range(0xD800, 0xE000))
)
_CLEAN_TABLE: dict[int, str | None] = {c: None for c in _DROPPED}
_CLEAN_TABLE.update({0x2028: "\n", 0x2029: "\n"})

_ENTITIES = ("&amp;", "&lt;", "&gt;")
_MENTION_RE = re.compile(r"^<(!subteam\^[A-Z0-9]+|!here|!channel|@[UW][A-Z0-9]+)>$")
_USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_URL_RE = re.compile(r"^https?://[^\s<>|]+$")
_TOKEN_RE = re.compile(r"<([^<>]*)>")
_ENTITY_RE = re.compile(r"&(amp|lt|gt);")


# --- text primitives ----------------------------------------------------------


def escape(text: str) -> str:
    """Make untrusted text inert in mrkdwn and in the `text` fallback.

    Slack only pings or links through `<…>` tokens, so escaping `&`, `<`, `>`
    is enough to stop `<!channel>` or `<https://x|y>`; control characters are
    dropped because they garble terminals and Slack renders them as junk.
    """
    cleaned = text.translate(_CLEAN_TABLE)
    return cleaned.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_len(text: str) -> int:
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
    if _slack_len(text) <= limit:
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


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?", ELLIPSIS)) else text + "."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _text(value: object, limit: int, *, default: str = NONE, multiline: bool = False) -> str:
    """Escape, tidy and cut an untrusted value; `default` when nothing is left."""
    if value is None:
        return default
    raw = value if isinstance(value, str) else _num(value)
    cleaned = escape(raw)
    if multiline:
        cleaned = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", cleaned.strip())
    else:
        cleaned = _one_line(cleaned)
    return truncate(cleaned, limit) if cleaned else default


def _code(value: str | None, limit: int) -> str:
    """An untrusted id in a code span; a backtick in it cannot end the span."""
    text = _text(value, limit)
    return text if text == NONE else "`" + text.replace("`", "ˋ") + "`"


def _num(value: object) -> str:
    """str() of a number from the API; huge ints raise in str(), so cap them."""
    if isinstance(value, float):
        return f"{value:g}"
    try:
        return str(value)
    except ValueError:
        return "(too large to show)"


def _link(url: str | None, label: str) -> str | None:
    """A `<url|label>` link, only for plain http(s) URLs; `label` is ours."""
    if url is None or len(url) > _MAX_LINK_URL or not _URL_RE.fullmatch(url):
        return None
    return f"<{url.replace('&', '&amp;')}|{label}>"


def _mention(mention: str | None) -> str:
    """Operator-configured mention passes through only in a known-safe form."""
    if mention is None:
        return ""
    if _MENTION_RE.fullmatch(mention):
        return mention
    return _text(mention, 100, default="")


# --- statuses and dates ----------------------------------------------------------


def status_words(raw_status: str) -> str:
    """Human word for a status; unknown ones are humanised from their raw name
    (so a new Together status shows up readably instead of being rejected)."""
    status = status_of(raw_status)
    if status in _STATUS_WORDS:
        return _STATUS_WORDS[status]
    human = short_status(raw_status).replace("_", " ").strip().lower().capitalize()
    return _text(human, 80, default="Unknown")


ERROR_CODE_PREFIX = "TRAINING_SESSION_ERROR_CODE_"
# Together's documented session error codes: a short phrase, and what to do next.
_ERROR_CODES: dict[str, tuple[str, str | None]] = {
    "RESOURCE_UNAVAILABLE": (
        "Model resource unavailable",
        "Check that the model resource is ready (it stops after its inactive timeout), "
        "then start a new session on a ready one.",
    ),
    "RESOURCE_AT_CAPACITY": (
        "Model resource at capacity",
        "Try again later or on another model resource; a LoRA training checkpoint can "
        "resume on another resource with compatible base-model weights.",
    ),
    "TIMED_OUT": (
        "Timed out",
        "Start a new session resuming from its latest training checkpoint to keep its progress.",
    ),
    "SESSION_FAILED": (
        "Session failed",
        "Read the message; to go on, start a new session resuming from its latest "
        "training checkpoint.",
    ),
}


def error_code_words(code: str | None) -> tuple[str, str | None]:
    """A phrase for an error code and, for documented codes, the next step; an
    unknown code is humanised from its name (`…_CODE_FOO_BAR` -> "Foo bar")."""
    short = (code or "").strip().removeprefix(ERROR_CODE_PREFIX)
    if short in _ERROR_CODES:
        return _ERROR_CODES[short]
    human = short.replace("_", " ").strip().lower().capitalize()
    return _text(human, 80, default="Unknown error"), None


def _short_code(code: str) -> str:
    """The code without Together's long common prefix, in a code span."""
    return _code(code.strip().removeprefix(ERROR_CODE_PREFIX) or code, 100)


_TYPE_PREFIXES = ("TRAINING_SESSION_TYPE_", "SESSION_TYPE_")


def session_type_words(raw: str | None) -> str | None:
    """`TRAINING_SESSION_TYPE_TRAINER_AND_GENERATOR` -> "Trainer and generator"."""
    if not raw or not raw.strip():
        return None
    short = raw.strip()
    for prefix in _TYPE_PREFIXES:
        short = short.removeprefix(prefix)
    human = short.replace("_", " ").strip().lower().capitalize()
    return _text(human, 80, default="") or None


def status_emoji(raw_status: str) -> str:
    """A distinct emoji per status so changes are visible at a glance."""
    return _STATUS_EMOJI[status_of(raw_status)]


def _timestamp(dt: datetime | None) -> float | None:
    if dt is None:
        return None
    try:
        return (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def slack_date(dt: datetime | None) -> str:
    """A `<!date>` token so each reader sees their own time zone; naive times
    are taken as UTC and the fallback is ISO 8601 in UTC."""
    if dt is None:
        return NONE
    try:
        aware = dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
        utc = aware.astimezone(UTC)
        unix = int(utc.timestamp())
    except (OverflowError, ValueError, OSError):
        return _text(dt.isoformat(), 60)
    fallback = utc.replace(microsecond=0, tzinfo=None).isoformat() + "Z"
    return f"<!date^{unix}^{{date_short_pretty}} at {{time}}|{fallback}>"


# --- block helpers --------------------------------------------------------------


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack would otherwise link bare URLs and channel names and parse
    # some mentions in API text; our own `<…>` tokens still work.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": _plain(truncate(text, MAX_HEADER_TEXT))}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(truncate(text, MAX_SECTION_TEXT))}


def _fields(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    fields = [_mrkdwn(truncate(f"*{label}*\n{value}", MAX_FIELD_TEXT)) for label, value in pairs]
    return {"type": "section", "fields": fields[:MAX_FIELDS]}


def _context(*texts: str) -> dict[str, Any]:
    elements = [_mrkdwn(truncate(t, MAX_CONTEXT_TEXT)) for t in texts if t]
    return {"type": "context", "elements": elements[:MAX_CONTEXT_ELEMENTS]}


def _button(
    label: str,
    action_id: str,
    *,
    value: str | None = None,
    url: str | None = None,
    style: str | None = None,
) -> dict[str, Any]:
    button: dict[str, Any] = {"type": "button", "text": _plain(label), "action_id": action_id}
    if value is not None:
        button["value"] = value
    if url is not None:
        button["url"] = url
    if style is not None:
        button["style"] = style
    return button


def _stop_button(session: TrainingSession) -> dict[str, Any]:
    """Stop asks first: Slack shows the confirm dialog before the click reaches us."""
    button = _button("Stop session", STOP, value=session.id, style="danger")
    button["confirm"] = {
        "title": _plain("Stop this training session?"),
        "text": _mrkdwn(
            f"This asks Together to stop {_text(session.name, 150)}. "
            "Training ends; checkpoints already saved are kept."
        ),
        "confirm": _plain("Stop it"),
        "deny": _plain("Keep running"),
        "style": "danger",
    }
    return button


def _message(fallback: str, blocks: list[dict[str, Any]]) -> Message:
    text = truncate(_defuse(_one_line(fallback)), _FALLBACK_LIMIT) or "rl-bot"
    return {"text": text, "blocks": blocks[:MAX_BLOCKS]}


# The `text` fallback (notifications, screen readers) has no `verbatim`: Slack
# links bare URLs and domains in it, and names too under `link_names`. A word
# joiner (U+2060, invisible) after `@`, `#`, the colon of `://` and a dot inside
# a word breaks each of those patterns; our own `<…>` tokens are left alone.
_WORD_JOINER = "\u2060"
_AUTOLINK_RE = re.compile(r"(?<=[@#])|(?<=:)(?=//)|(?<=\w\.)(?=\w)")


def _defuse(text: str) -> str:
    parts = _TOKEN_RE.split(text)  # odd items are the insides of `<…>` tokens
    return "".join(
        f"<{part}>" if i % 2 else _AUTOLINK_RE.sub(_WORD_JOINER, part)
        for i, part in enumerate(parts)
    )


def _name(session: TrainingSession) -> str:
    """Display name, else id, else a placeholder: never blank."""
    name = _text(session.display_name, _NAME_LIMIT, default="")
    return name or _text(session.id, _ID_LIMIT, default="(unnamed session)")


def _label(session: TrainingSession) -> str:
    """Name and id for one-line summaries (notifications show no blocks); the
    id alone when there is no display name."""
    name = _text(session.display_name, _NAME_LIMIT, default="")
    return f"{name} ({_text(session.id, _ID_LIMIT)})" if name else _name(session)


# --- the session card -------------------------------------------------------------


def _checkpoint_key(cp: Checkpoint) -> tuple[bool, float]:
    ts = _timestamp(cp.created_at)
    return (ts is not None, ts if ts is not None else 0.0)


def registration_words(kind: str, names: Sequence[str]) -> str | None:
    """What a checkpoint's registration is for. A training checkpoint's is a
    registry artifact of training state, to resume from; an inference
    checkpoint's is the model and/or adapter to deploy."""
    shown = [_text(n, _VALUE_LIMIT) for n in names[:3]]
    if not shown:
        return None
    if kind == "training":
        return "resumable state " + ", ".join(shown)
    return "deployable as " + " and ".join(shown)


def _checkpoint_line(cp: Checkpoint) -> str:
    parts = [_code(cp.id, _ID_LIMIT) if cp.id else "(no id)", slack_date(cp.created_at)]
    if cp.step is not None:
        parts.append(f"step {_text(cp.step, 40)}")
    kind = "training" if isinstance(cp, TrainingCheckpoint) else "inference"
    registration = registration_words(kind, cp.registered_names())
    if registration:
        parts.append(registration)
    return "• " + " · ".join(parts)


_CHECKPOINT_KINDS = {
    "training": "training state to resume from",
    "inference": "weights to deploy",
}


def _checkpoint_section(kind: str, checkpoints: Sequence[Checkpoint], total: int) -> dict[str, Any]:
    """The newest few checkpoints of one kind; the rest (of `total`) are only counted."""
    newest = sorted(checkpoints, key=_checkpoint_key, reverse=True)[:_LATEST_CHECKPOINTS]
    title = f"*Latest {kind} checkpoints* ({_CHECKPOINT_KINDS.get(kind, kind)})"
    lines = [title] + [_checkpoint_line(cp) for cp in newest]
    more = total - len(newest)
    if more > 0:
        lines.append(f"…and {more} more {kind} checkpoint{'s' if more != 1 else ''}")
    # Each line is bounded well under a third of the limit, so the "and N more"
    # line always survives the final cut.
    return _section("\n".join(lines))


def _error_text(session: TrainingSession) -> str:
    error = session.error
    if error is None or not (error.code or error.message):
        return "*Error:* Together gave no error details."
    lines = ["*Error*"]
    next_step = None
    if error.code:
        phrase, next_step = error_code_words(error.code)
        lines = [f"*Error: {phrase}* {_short_code(error.code)}"]
    if error.message:
        lines.append(_text(error.message, _ERROR_MESSAGE_LIMIT, multiline=True))
    if next_step:
        lines.append(f"*Next step:* {next_step}")
    if error.occurred_at is not None:
        lines.append(f"Occurred {slack_date(error.occurred_at)}")
    return "\n".join(lines)


def _lora_text(session: TrainingSession) -> str | None:
    lora = session.lora_config
    if lora is None:
        return None
    parts = [
        f"{label} {_text(value, 40)}"
        for label, value in (
            ("rank", lora.rank),
            ("alpha", lora.alpha),
            ("dropout", lora.dropout),
            ("seed", lora.seed),
        )
        if value is not None
    ]
    if lora.train_unembed is not None:
        parts.append(f"train unembed {'yes' if lora.train_unembed else 'no'}")
    return "*LoRA:* " + (" · ".join(parts) if parts else "default settings")


def _policy_text(session: TrainingSession) -> str | None:
    """The trainer's policy version against the one the generator applied, on one line."""
    policy = session.policy_state
    if policy is None:
        return None
    parts = []
    if policy.trainer_step is not None:
        parts.append(f"trainer step {_text(policy.trainer_step, 40)}")
    if policy.applied_weights_version is not None:
        applied = f"applied weights version {_text(policy.applied_weights_version, 40)}"
        target = policy.target_weights_version
        if target is not None and target != policy.applied_weights_version:
            applied += f" (target {_text(target, 40)})"
        parts.append(applied)
    if policy.pending_publish:
        parts.append("pending publish")
    return "*Policy state:* " + " · ".join(parts) if parts else None


def card(
    session: TrainingSession, *, subscribed: bool = False, now: datetime | None = None
) -> Message:
    """The session card, posted once and then edited in place.

    `now` (when the bot fetched the session) is optional: without it the card
    depends only on the session, so an unchanged session renders identically
    and the caller can skip a pointless chat.update.
    """
    raw = session.status
    name = _name(session)
    session_id = _code(session.id, _ID_LIMIT)
    status = f"{status_emoji(raw)} {status_words(raw)}"

    blocks: list[dict[str, Any]] = [
        _header(f"{status_emoji(raw)} {name}"),
    ]
    pairs = [
        ("Status", status),
        ("ID", session_id),
        ("Base model", _text(session.base_model, _VALUE_LIMIT)),
        ("Model resource", _code(session.model_resources_id, _ID_LIMIT)),
        ("Created by", _text(session.created_by, _VALUE_LIMIT)),
        ("Created", slack_date(session.created_at)),
        ("Updated", slack_date(session.updated_at)),
    ]
    if session.step is not None:
        pairs.append(("Step", _text(session.step, 40)))
    session_type = session_type_words(session.type)
    if session_type:
        pairs.append(("Type", session_type))
    blocks.append(_fields(pairs))

    details = []
    lora = _lora_text(session)
    if lora:
        details.append(lora)
    if session.resume_from_checkpoint_id:
        details.append(
            f"*Resumed from checkpoint:* {_code(session.resume_from_checkpoint_id, _ID_LIMIT)}"
        )
    policy = _policy_text(session)
    if policy:
        details.append(policy)
    if details:
        blocks.append(_section("\n".join(details)))

    if session.error is not None and (session.error.code or session.error.message):
        blocks.append(_section(f"{status_emoji(Status.ERROR.value)} {_error_text(session)}"))

    training, inference = session.training_checkpoints, session.inference_checkpoints
    # A stored snapshot keeps only the newest checkpoints, and their counts.
    n_training = checkpoint_count(session, "training")
    n_inference = checkpoint_count(session, "inference")
    blocks.append(_section(f"*Checkpoints:* training {n_training} · inference {n_inference}"))
    if training:
        blocks.append(_checkpoint_section("training", training, n_training))
    if inference:
        blocks.append(_checkpoint_section("inference", inference, n_inference))

    buttons: list[dict[str, Any]] = []
    # A button's value must round-trip to a session id the handlers accept.
    if is_session_id(session.id):
        if subscribed:
            buttons.append(_button("Unsubscribe", UNSUBSCRIBE, value=session.id))
        else:
            buttons.append(_button("Subscribe", SUBSCRIBE, value=session.id, style="primary"))
        buttons.append(_button("Refresh", REFRESH, value=session.id))
        if session.status_enum in STOPPABLE:
            buttons.append(_stop_button(session))
    wandb_url = session.wandb_url
    if wandb_url is not None:
        buttons.append(_button("W&B run", WANDB, url=wandb_url))
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})

    updated = now if now is not None else session.updated_at
    blocks.append(_context(f"Last updated {slack_date(updated)}"))

    return _message(f"{status_words(raw)} · {_label(session)}", blocks)


# --- notifications -------------------------------------------------------------------


_ENDED = "This session has finished, so this subscription has ended; no further updates."
_GONE = (
    "This session no longer exists on Together, so this subscription has ended; no further updates."
)


def transition_message(
    session: TrainingSession,
    old_status: str,
    new_status: str,
    *,
    ended: bool,
    gone: bool = False,
) -> Message:
    """One thread reply per status change; the end of the subscription is said
    in the same message so a thread never has a dangling closing line."""
    name = _name(session)
    old_words, new_words = status_words(old_status), status_words(new_status)
    change = f"{status_emoji(old_status)} {old_words} → {status_emoji(new_status)} {new_words}"
    blocks: list[dict[str, Any]] = []
    fallback = [f"{name}:"]
    if not gone or short_status(old_status) != short_status(new_status):
        blocks.append(_section(f"*Status changed:* {change}"))
        fallback.append(f"Status changed: {old_words} → {new_words}.")
    if status_of(new_status) is Status.ERROR:
        blocks.append(_section(_error_text(session)))
        error = session.error
        if error is not None and (error.code or error.message):
            phrase = error_code_words(error.code)[0] if error.code else None
            detail = ": ".join(_text(v, 300) for v in (phrase, error.message) if v)
            fallback.append(_sentence(f"Error: {detail}"))
    if gone:
        blocks.append(_section(f":wastebasket: {_GONE}"))
        fallback.append(_GONE)
    elif ended:
        blocks.append(_section(f":checkered_flag: {_ENDED}"))
        fallback.append(_ENDED)
    return _message(" ".join(fallback), blocks)


def oncall_alert(
    session: TrainingSession, *, permalink: str | None, mention: str | None
) -> Message:
    """Alert for a session that entered ERROR, with enough to triage it here."""
    prefix = _mention(mention)
    lead = f"{prefix} " if prefix else ""
    name = _name(session)
    error = session.error
    code = error.code if error is not None else None
    message = error.message if error is not None else None
    occurred = error.occurred_at if error is not None else None
    phrase, next_step = error_code_words(code) if code else (None, None)

    blocks: list[dict[str, Any]] = [
        _section(f"{lead}:rotating_light: *Training session entered Error:* {name}"),
        _fields(
            [
                ("Session ID", _code(session.id, _ID_LIMIT)),
                ("Error", f"{phrase} {_short_code(code)}" if code else NONE),
                ("Base model", _text(session.base_model, _VALUE_LIMIT)),
                ("Created by", _text(session.created_by, _VALUE_LIMIT)),
                ("Occurred", slack_date(occurred)),
            ]
        ),
        _section(
            "*Error message*\n"
            + _text(message, _ERROR_MESSAGE_LIMIT, multiline=True, default="(none given)")
            + (f"\n*Next step:* {next_step}" if next_step else "")
        ),
    ]
    link = _link(permalink, "View thread")
    if link is not None:
        blocks.append(_section(link))

    summary = f"{lead}Training session {_label(session)} entered Error"
    if code or message:
        summary += ": " + ": ".join(_text(v, 300) for v in (phrase, message) if v)
    return _message(summary, blocks)


def operator_alert(title: str, detail: str, *, mention: str | None) -> Message:
    """Incidents for whoever runs the bot (key rejected, Together unreachable,
    recovered); `detail` may quote Together's response, so it is escaped."""
    prefix = _mention(mention)
    lead = f"{prefix} " if prefix else ""
    heading = _text(title, MAX_HEADER_TEXT, default="rl-bot")
    body = _text(detail, _ERROR_MESSAGE_LIMIT, multiline=True, default="")
    section = f"{lead}{body}".strip() or "(no details)"
    return _message(
        f"{lead}{heading}: {body or '(no details)'}", [_header(heading), _section(section)]
    )


# --- replies to commands -------------------------------------------------------------


_USAGE = [
    ("/rl-session <id>", "show a training session's card"),
    (
        "/rl-session subscribe <id> [status] [checkpoints] [errors-only]",
        "post the card here and follow it (default: status changes)",
    ),
    ("/rl-session unsubscribe <id>", "stop following it in this channel"),
    (
        "/rl-session mute <id> <duration>",
        "pause this channel's updates, e.g. 2h (errors still page on-call)",
    ),
    ("/rl-session unmute <id>", "resume them now"),
    ("/rl-session digest on HH:MM [Area/City]", "a daily summary here (`digest off` stops it)"),
    ("/rl-session list", "this channel's subscriptions"),
    ("/rl-session help", "this message"),
]


def help_message() -> Message:
    """Usage naming every form of the command."""
    lines = [f"• `{escape(form)}` — {what}" for form, what in _USAGE]
    text = "*rl-bot shows Together RL training sessions.*\n" + "\n".join(lines)
    fallback = "rl-bot usage: " + "; ".join(escape(form) for form, _ in _USAGE)
    return _message(fallback, [_section(text)])


def notice(text: str) -> Message:
    """A one-section reply for errors or info the bot itself writes; the text is
    ours and already mrkdwn, so it is cut but not escaped."""
    body = text.strip() or "(no details)"
    return _message(body, [_section(body)])


def subscription_list(
    rows: Sequence[tuple[str, str | None, str | None, str | None]],
    notes: Sequence[str | None] | None = None,
) -> Message:
    """This channel's subscriptions, packed into as few sections as fit.

    `notes`, aligned with `rows`, are the bot's own words (filters, mute)."""
    if not rows:
        return notice(
            f"This channel has no subscriptions. Use `{escape('/rl-session subscribe <id>')}`."
        )
    lines = []
    for index, (session_id, display_name, last_status, permalink) in enumerate(
        rows[:_MAX_LIST_ROWS]
    ):
        if last_status is None:
            status = f"{status_emoji('')} not checked yet"
        else:
            status = f"{status_emoji(last_status)} {status_words(last_status)}"
        name = _text(display_name, _NAME_LIMIT, default="")
        label = f"*{name}* {_code(session_id, _ID_LIMIT)}" if name else _code(session_id, _ID_LIMIT)
        link = _link(permalink, "thread")
        note = notes[index] if notes is not None and index < len(notes) else None
        lines.append(
            f"{label} · {status}" + (f" · {link}" if link else "") + (f" · {note}" if note else "")
        )

    count = len(rows)
    blocks: list[dict[str, Any]] = [
        _header(f"Subscriptions in this channel ({count})"),
    ]
    sections: list[str] = []
    current: list[str] = []
    placed = 0
    room = MAX_BLOCKS - 2  # the header and the "and N more" context
    for line in lines:
        if current and _slack_len("\n".join([*current, line])) > MAX_SECTION_TEXT:
            sections.append("\n".join(current))
            placed += len(current)
            current = []
            if len(sections) >= room:
                break
        current.append(line)
    if current:
        sections.append("\n".join(current))
        placed += len(current)
    blocks += [_section(text) for text in sections]
    if placed < count:
        blocks.append(_context(f"…and {count - placed} more"))
    noun = "subscription" if count == 1 else "subscriptions"
    return _message(f"This channel has {count} {noun}.", blocks)


def unsubscribed_message(user_id: str) -> Message:
    """Said in the channel so everyone knows why updates stopped, and who."""
    who = (
        f"<@{user_id}>"
        if _USER_ID_RE.fullmatch(user_id)
        else _text(user_id, 100, default="Someone")
    )
    text = f"{who} unsubscribed this channel; no further updates here."
    return _message(text, [_section(text)])


def checkpoint_message(session: TrainingSession, items: Sequence[dict[str, Any]]) -> Message:
    """All checkpoints that appeared in one poll, told as one message.

    Each item is `{"kind", "id", "step", "created_at", "registered", "event"}`
    where event is "new" or "registered" (a registration appeared later)."""
    name = _name(session)
    lines = []
    for item in items[:_LIST_CHECKPOINTS]:
        kind = "Training" if item.get("kind") == "training" else "Inference"
        what = "registered" if item.get("event") == "registered" else "new"
        parts = [f"*{kind} checkpoint {what}:* {_code(str(item.get('id') or ''), _ID_LIMIT)}"]
        if item.get("step") is not None:
            parts.append(f"step {_text(item.get('step'), 40)}")
        registered = item.get("registered")
        names = [str(n) for n in registered] if isinstance(registered, list) else []
        words = registration_words("training" if kind == "Training" else "inference", names)
        if words:
            parts.append(words)
        lines.append("• " + " · ".join(parts))
    more = len(items) - len(lines)
    if more > 0:
        lines.append(f"…and {more} more")
    count = len(items)
    head = f":floppy_disk: {count} new checkpoint event{'s' if count != 1 else ''}"
    blocks = [_section(head + "\n" + "\n".join(lines))]
    if session.step is not None:
        blocks.append(_context(f"Latest step {_text(session.step, 40)}"))
    return _message(f"{name}: {count} checkpoint event{'s' if count != 1 else ''}.", blocks)


_LIST_CHECKPOINTS = 10


def _who(user_id: str) -> str:
    return f"<@{user_id}>" if _USER_ID_RE.fullmatch(user_id) else _text(user_id, 100)


def muted_message(user_id: str, until: datetime) -> Message:
    text = (
        f":zipper_mouth_face: {_who(user_id)} muted this thread until {slack_date(until)}. "
        "Updates resume then; errors still reach on-call."
    )
    return _message(text, [_section(text)])


def unmuted_message(user_id: str) -> Message:
    text = f":loud_sound: {_who(user_id)} unmuted this thread; updates resume now."
    return _message(text, [_section(text)])


def stop_requested_message(user_id: str, session: TrainingSession) -> Message:
    text = (
        f":octagonal_sign: {_who(user_id)} asked Together to stop this session. "
        f"Together says it is now {status_words(session.status).lower()}."
    )
    return _message(text, [_section(text)])


def _session_lines(rows: Sequence[tuple[str, str | None, str]], most: int) -> str:
    """One line per (session id, display name, status), at most `most`, then a count."""
    lines = [
        f"{status_emoji(status)} {_text(name, _NAME_LIMIT, default='') or _code(sid, _ID_LIMIT)}"
        f" · {status_words(status)}"
        for sid, name, status in rows[:most]
    ]
    if len(rows) > most:
        lines.append(f"…and {len(rows) - most} more")
    return "\n".join(lines)


def digest_message(
    day: str,
    sessions: Sequence[tuple[str, str | None, str]],
    transitions: Sequence[tuple[str, str, str]],
) -> Message:
    """The daily digest: each watched session's state, then the day's changes.

    `sessions` are (session_id, display_name, status); `transitions` are
    (session name or id, old status, new status)."""
    blocks: list[dict[str, Any]] = [_header(f"Training sessions: daily digest, {escape(day)}")]
    if sessions:
        blocks.append(_section("*Watched here*\n" + _session_lines(sessions, 40)))
    else:
        blocks.append(_section("No sessions are watched in this channel."))
    if transitions:
        lines = [
            f"• {_text(name, _NAME_LIMIT)}: {status_words(old)} → {status_words(new)}"
            for name, old, new in transitions[:40]
        ]
        if len(transitions) > 40:
            lines.append(f"…and {len(transitions) - 40} more")
        blocks.append(_section("*Changes in the last 24 hours*\n" + "\n".join(lines)))
    else:
        blocks.append(_context("No status changes in the last 24 hours."))
    count = len(sessions)
    return _message(
        f"Daily digest {day}: {count} watched session{'s' if count != 1 else ''}, "
        f"{len(transitions)} change{'s' if len(transitions) != 1 else ''}.",
        blocks,
    )


def home_view(
    subscriptions: Sequence[tuple[int, str, str, str | None, str | None]],
    created: Sequence[tuple[str, str | None, str]],
) -> dict[str, Any]:
    """The App Home tab: your subscriptions across channels, and your sessions.

    `subscriptions` are (subscription id, channel id, session id, display name,
    last status); `created` are (session id, display name, status)."""
    blocks: list[dict[str, Any]] = [_header("Your training-session subscriptions")]
    if not subscriptions:
        blocks.append(
            _section(
                f"You have no subscriptions. Use `{escape('/rl-session subscribe <id>')}` "
                "in a channel."
            )
        )
    for sub_id, channel, session_id, name, status in subscriptions[:20]:
        label = _text(name, _NAME_LIMIT, default="") or _code(session_id, _ID_LIMIT)
        state = (
            f"{status_emoji(status or '')} {status_words(status or '')}"
            if status
            else "not checked yet"
        )
        channel_ref = (
            f"<#{channel}>" if re.fullmatch(r"[CG][A-Z0-9]{2,20}", channel) else _text(channel, 40)
        )
        block = _section(f"*{label}* in {channel_ref} · {state}")
        block["accessory"] = _button("Unsubscribe", HOME_UNSUBSCRIBE, value=str(sub_id))
        blocks.append(block)
    if len(subscriptions) > 20:
        blocks.append(_context(f"…and {len(subscriptions) - 20} more"))
    blocks.append({"type": "divider"})
    blocks.append(_header("Sessions you created"))
    if created:
        blocks.append(_section(_session_lines(created, 30)))
    else:
        blocks.append(
            _context("None that the bot is watching (or no CREATED_BY_USER_MAP entry for you).")
        )
    return {"type": "home", "blocks": blocks[:MAX_BLOCKS]}


# --- terminal rendering --------------------------------------------------------------


def _token_text(match: re.Match[str]) -> str:
    inner = match.group(1)
    if inner.startswith("!date^"):
        return inner.split("|", 1)[1] if "|" in inner else inner.split("^")[1]
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        return label or target
    if target.startswith("!subteam^"):
        return label or "@" + target.removeprefix("!subteam^")
    if target.startswith("!"):
        return label or "@" + target[1:]
    if target.startswith("#"):
        return "#" + label if label else target
    return f"{label} ({target})" if label else target


def _plain_from_mrkdwn(text: str) -> str:
    """Tokens to readable text, then entities back to characters (one pass, so
    `&amp;lt;` becomes `&lt;` and not `<`)."""
    untokened = _TOKEN_RE.sub(_token_text, text)
    untokened = untokened.replace(_WORD_JOINER, "")
    unescaped = _ENTITY_RE.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], untokened)
    # escape() already dropped control characters from API values; repeat it so
    # nothing in a message can send escape sequences to a terminal.
    return unescaped.translate(_CLEAN_TABLE)


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return _plain_from_mrkdwn(obj["text"])
    return ""


def as_text(message: Message) -> str:
    """Render a message for a terminal (`rl-bot show <id>`)."""
    blocks = message.get("blocks") or []
    if not blocks:
        return _plain_from_mrkdwn(str(message.get("text", "")))
    out: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            title = _text_of(block.get("text"))
            out += [title, "=" * min(len(title), 80)]
        elif kind == "section":
            if block.get("text"):
                out.append(_text_of(block["text"]))
            for field in block.get("fields") or []:
                label, _, value = _text_of(field).partition("\n")
                label = label[1:-1] if len(label) > 1 and label[0] == label[-1] == "*" else label
                out.append(f"{label}: {value}" if value else label)
        elif kind == "context":
            out.append(" · ".join(_text_of(e) for e in block.get("elements") or []))
        elif kind == "actions":
            buttons = []
            for element in block.get("elements") or []:
                label = _text_of(element.get("text"))
                url = element.get("url")
                buttons.append(f"[{label}] {url}" if url else f"[{label}]")
            out.append("  ".join(buttons))
        elif kind == "divider":
            out.append("-" * 40)
    return "\n".join(out)


# --- validation --------------------------------------------------------------------


def _check_text(
    obj: Any, where: str, limit: int, problems: list[str], *, plain: bool = False
) -> None:
    if not isinstance(obj, dict):
        problems.append(f"{where}: text object missing")
        return
    kind, text = obj.get("type"), obj.get("text")
    if kind not in ("plain_text", "mrkdwn"):
        problems.append(f"{where}: text type {kind!r} is not plain_text or mrkdwn")
    elif plain and kind != "plain_text":
        problems.append(f"{where}: must be plain_text")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: text is empty")
    elif _slack_len(text) > limit:
        problems.append(f"{where}: text is {_slack_len(text)} characters, limit {limit}")


def _check_actions(block: dict[str, Any], where: str, problems: list[str], seen: set[str]) -> None:
    elements = block.get("elements")
    if not isinstance(elements, list) or not elements:
        problems.append(f"{where}: actions block has no elements")
        return
    if len(elements) > MAX_ACTION_ELEMENTS:
        problems.append(f"{where}: {len(elements)} elements, limit {MAX_ACTION_ELEMENTS}")
    for j, element in enumerate(elements):
        at = f"{where}.elements[{j}]"
        if not isinstance(element, dict):
            problems.append(f"{at}: not an object")
            continue
        _check_text(element.get("text"), f"{at}.text", MAX_BUTTON_TEXT, problems, plain=True)
        action_id = element.get("action_id")
        if action_id is not None:
            if not isinstance(action_id, str) or not action_id or len(action_id) > MAX_ACTION_ID:
                problems.append(f"{at}: bad action_id {action_id!r}")
            elif action_id in seen:
                problems.append(f"{at}: action_id {action_id!r} is not unique")
            else:
                seen.add(action_id)
        for key, limit in (("value", MAX_BUTTON_VALUE), ("url", MAX_BUTTON_URL)):
            value = element.get(key)
            if value is not None and (not isinstance(value, str) or _slack_len(value) > limit):
                problems.append(f"{at}: {key} longer than {limit} characters or not a string")


def block_kit_problems(message: Message) -> list[str]:
    """Slack's limits, checked before sending: a message over any of them is
    rejected whole (invalid_blocks), so the tests hold every renderer to this."""
    problems: list[str] = []
    text = message.get("text")
    if not isinstance(text, str) or not text.strip():
        problems.append("text fallback is missing or empty")
    elif _slack_len(text) > MAX_FALLBACK_TEXT:
        problems.append(
            f"text fallback is {_slack_len(text)} characters, limit {MAX_FALLBACK_TEXT}"
        )
    blocks = message.get("blocks", [])
    if not isinstance(blocks, list):
        return [*problems, "blocks is not a list"]
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks, limit {MAX_BLOCKS}")
    seen_actions: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict):
            problems.append(f"{where}: not an object")
        elif kind == "header":
            _check_text(block.get("text"), f"{where}.text", MAX_HEADER_TEXT, problems, plain=True)
        elif kind == "section":
            fields = block.get("fields")
            if "text" not in block and not fields:
                problems.append(f"{where}: section has neither text nor fields")
            if "text" in block:
                _check_text(block["text"], f"{where}.text", MAX_SECTION_TEXT, problems)
            if fields is not None:
                if not isinstance(fields, list) or not fields or len(fields) > MAX_FIELDS:
                    count = len(fields) if isinstance(fields, list) else "bad"
                    problems.append(f"{where}: {count} fields, allowed 1 to {MAX_FIELDS}")
                else:
                    for j, field in enumerate(fields):
                        _check_text(field, f"{where}.fields[{j}]", MAX_FIELD_TEXT, problems)
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not elements:
                problems.append(f"{where}: context block has no elements")
            else:
                if len(elements) > MAX_CONTEXT_ELEMENTS:
                    problems.append(
                        f"{where}: {len(elements)} context elements, limit {MAX_CONTEXT_ELEMENTS}"
                    )
                for j, element in enumerate(elements):
                    if isinstance(element, dict) and element.get("type") == "image":
                        continue
                    _check_text(element, f"{where}.elements[{j}]", MAX_CONTEXT_TEXT, problems)
        elif kind == "actions":
            _check_actions(block, where, problems, seen_actions)
        elif kind != "divider":
            problems.append(f"{where}: unexpected block type {kind!r}")
    return problems
