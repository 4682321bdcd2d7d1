"""The pure rules behind bounded inputs: `Retry-After` parsing, stored
snapshots trimmed without changing the card, text fallbacks Slack cannot
auto-link, and the cached readiness check. No processes, no network."""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
from datetime import UTC, datetime, timedelta

import httpx
from hypothesis import given
from hypothesis import strategies as st

from bot import rendering
from bot.ops.retry_after import parse_retry_after
from bot.rendering.terminal import as_text
from bot.simulated import make_session
from bot.slack.web import CachedCheck
from bot.together.errors import MAX_RETRY_AFTER, retry_after_seconds
from bot.training.sessions import TrainingSession
from bot.training.snapshots import (
    KEPT_CHECKPOINTS,
    MAX_DEPTH,
    MAX_KEYS,
    MAX_STRING,
    SessionSnapshot,
    checkpoint_count,
    trimmed_snapshot,
)

NOW = 1_800_000_000.0


# --- Retry-After ---------------------------------------------------------------------------


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(7) == 7.0
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert parse_retry_after(date, now=NOW) == 30.0
    past = email.utils.formatdate(NOW - 30, usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0


def test_retry_after_junk_is_absent() -> None:
    for raw in ("soon", "nan", "NaN", "inf", "-inf", "Infinity", "-5", "+5", "1e3", "1_000",
                "", "  ", "0x10", "5s", "9" * 400, "Wed, 99 Foo 2015", None, True, [], {}):  # fmt: skip
        assert parse_retry_after(raw, now=NOW) is None, raw


@given(st.text(max_size=80))
def test_retry_after_is_none_or_finite_and_non_negative(raw: str) -> None:
    value = parse_retry_after(raw, now=NOW)
    assert value is None or (math.isfinite(value) and value >= 0)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_retry_after_of_any_float_text_is_safe(number: float) -> None:
    value = parse_retry_after(repr(number), now=NOW)
    assert value is None or (math.isfinite(value) and value >= 0)
    assert retry_after_seconds(httpx.Headers({"Retry-After": repr(number)}), now=NOW) in (
        None,
        *([min(value, MAX_RETRY_AFTER)] if value is not None else []),
    )


@given(st.text(max_size=40), st.text(max_size=40))
def test_together_retry_after_is_bounded_or_absent(retry: str, reset: str) -> None:
    headers = {}
    for name, value in (("Retry-After", retry), ("x-ratelimit-reset", reset)):
        try:
            value.encode("ascii")
        except UnicodeEncodeError:
            continue
        if "\n" not in value and "\r" not in value:
            headers[name] = value
    value = retry_after_seconds(httpx.Headers(headers), now=NOW)
    assert value is None or 0 <= value <= MAX_RETRY_AFTER


def test_together_reset_header_as_delta_or_epoch() -> None:
    assert retry_after_seconds(httpx.Headers({"x-ratelimit-reset": "12"}), now=NOW) == 12.0
    epoch = str(int(NOW + 40))
    assert retry_after_seconds(httpx.Headers({"x-ratelimit-reset": epoch}), now=NOW) == 40.0
    assert retry_after_seconds(httpx.Headers({"x-ratelimit-reset": "nan"}), now=NOW) is None
    junk = {"Retry-After": "soon", "x-ratelimit-reset": "3"}
    assert retry_after_seconds(httpx.Headers(junk), now=NOW) == 3.0


# --- stored snapshots ------------------------------------------------------------------------


def big_session(checkpoints: int = 400, **over: object) -> TrainingSession:
    data = make_session("123e4567-e89b-12d3-a456-426614174000", checkpoints=checkpoints, **over)
    data["metadata"]["huge"] = ["x" * 1000] * 500
    data["unknown_big_field"] = "y" * 100_000
    return TrainingSession.model_validate(data)


def test_a_trimmed_snapshot_is_small_and_renders_the_same_card() -> None:
    session = big_session(error={"code": "E", "message": "m" * 50_000})
    snapshot = trimmed_snapshot(session)
    stored = json.dumps(snapshot)
    assert len(stored) < 16_000, len(stored)
    again = SessionSnapshot.model_validate(json.loads(stored))  # as the column reads it
    assert len(again.training_checkpoints) == KEPT_CHECKPOINTS
    assert checkpoint_count(again, "training") == 400
    assert checkpoint_count(again, "inference") == 400
    assert rendering.card(again) == rendering.card(session)
    assert rendering.card(again, subscribed=True) == rendering.card(session, subscribed=True)
    assert again.wandb_url == session.wandb_url
    # Trimming a trimmed snapshot changes nothing.
    assert trimmed_snapshot(again) == snapshot


def test_a_trimmed_snapshot_keeps_the_newest_checkpoints() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    checkpoints = [
        {"id": f"ck-{i}", "created_at": (now + timedelta(minutes=i)).isoformat()}
        for i in (3, 9, 1, 7, 5, 8, 2, 6, 4, 0)
    ] + [{"id": "undated"}]
    session = TrainingSession.model_validate(
        {"id": "s1", "training_checkpoints": checkpoints, "inference_checkpoints": []}
    )
    kept = [c["id"] for c in trimmed_snapshot(session)["training_checkpoints"]]
    assert kept == ["ck-9", "ck-7", "ck-5", "ck-8", "ck-6"]  # the newest five, in API order


def test_undated_checkpoints_keep_the_ones_the_card_shows() -> None:
    undated = [{"id": f"ck-{i}"} for i in range(12)]
    session = TrainingSession.model_validate(
        {"id": "s1", "training_checkpoints": undated, "inference_checkpoints": undated}
    )
    again = SessionSnapshot.model_validate(trimmed_snapshot(session))
    assert rendering.card(again) == rendering.card(session)


def test_a_small_session_is_kept_whole() -> None:
    session = TrainingSession.model_validate(make_session("s1", checkpoints=2))
    again = TrainingSession.model_validate(trimmed_snapshot(session))
    assert again.training_checkpoints == session.training_checkpoints
    assert again.inference_checkpoints == session.inference_checkpoints
    assert rendering.card(again) == rendering.card(session)


def test_a_snapshot_bounds_nested_extras_and_metadata() -> None:
    """Whatever Together adds inside a field is cut to the same bounds at every depth."""
    deep: dict[str, object] = {"v": 1}
    for level in range(8):
        deep = {f"d{level}": deep}
    extra = {
        **{f"k{i}": "y" * 3000 for i in range(60)},
        "list": [[i, "z" * 3000] for i in range(50)],
        "deep": deep,
    }
    session = TrainingSession.model_validate(
        make_session("s1", lora_config={"rank": 8, "extra": extra}, display_name="n" * 5000)
        | {"metadata": {"wandb": {"url": "u" * 4000, "nested": deep}, "other": "x" * 99}}
    )
    snapshot = trimmed_snapshot(session)
    assert len(snapshot["display_name"]) == MAX_STRING
    kept = snapshot["lora_config"]["extra"]
    assert len(kept) == MAX_KEYS  # the first MAX_KEYS keys, in order
    assert list(kept)[:2] == ["k0", "k1"] and len(kept["k0"]) == MAX_STRING
    assert snapshot["metadata"] == {"wandb": snapshot["metadata"]["wandb"]}
    assert len(snapshot["metadata"]["wandb"]["url"]) == MAX_STRING
    assert "deep" not in kept  # past the first MAX_KEYS keys

    # depth: levels past MAX_DEPTH are cut to None
    def depth(value: object) -> int:
        if isinstance(value, dict):
            return 1 + max((depth(v) for v in value.values()), default=0)
        return 0

    assert depth(snapshot["metadata"]) <= MAX_DEPTH + 1
    assert trimmed_snapshot(TrainingSession.model_validate(snapshot)) == snapshot


# --- text Slack could auto-link ----------------------------------------------------------------

HOSTILE = "@here see https://evil.example/x, www.evil.example and #general"


def _mrkdwn_objects(value: object) -> list[dict[str, object]]:
    if isinstance(value, dict):
        own = [value] if value.get("type") == "mrkdwn" else []
        return own + [o for v in value.values() for o in _mrkdwn_objects(v)]
    if isinstance(value, list):
        return [o for v in value for o in _mrkdwn_objects(v)]
    return []


def test_every_mrkdwn_text_is_verbatim_and_fallbacks_cannot_autolink() -> None:
    session = TrainingSession.model_validate(
        make_session(
            "s1",
            status="ERROR",
            display_name=HOSTILE,
            error={"code": HOSTILE, "message": HOSTILE},
        )
    )
    messages = [
        rendering.card(session),
        rendering.transition_message(session, "RUNNING", session.status, ended=True),
        rendering.oncall_alert(session, permalink=None, mention="<!subteam^S0123>"),
        rendering.notice(HOSTILE),
        rendering.help_message(),
    ]
    for message in messages:
        objects = _mrkdwn_objects(message["blocks"])
        assert objects and all(o.get("verbatim") is True for o in objects)
        text = message["text"]
        for pattern in ("https://", "www.e", "evil.example", "@here", "#general"):
            assert pattern not in text, (pattern, text)
    # Our own tokens are untouched; a terminal shows the text without the joiners.
    alert = rendering.oncall_alert(session, permalink=None, mention="<!subteam^S0123>")
    assert alert["text"].startswith("<!subteam^S0123> ")
    assert "https://evil.example/x" in as_text({"text": alert["text"], "blocks": []})


# --- the cached readiness check ----------------------------------------------------------------


def test_cached_check_runs_once_per_ttl_and_retries_failures_sooner() -> None:
    now = [0.0]
    answers = iter(["ok", "invalid_auth", "ok"])
    calls = []

    async def check() -> str:
        calls.append(now[0])
        await asyncio.sleep(0)
        return next(answers)

    cached = CachedCheck(check, ttl=60, failure_ttl=10, clock=lambda: now[0])

    async def scenario() -> list[str]:
        seen = list(await asyncio.gather(*(cached.result() for _ in range(20))))
        now[0] = 59.0
        seen.append(await cached.result())
        now[0] = 60.0
        seen.append(await cached.result())  # expired: asks again, and fails
        now[0] = 65.0
        seen.append(await cached.result())  # a failure is kept only 10 s
        now[0] = 70.0
        seen.append(await cached.result())
        return seen

    seen = asyncio.run(scenario())
    assert seen == ["ok"] * 21 + ["invalid_auth", "invalid_auth", "ok"]
    assert calls == [0.0, 60.0, 70.0]
