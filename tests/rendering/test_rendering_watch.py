"""Stall and spend watch messages (bot/rendering/watch.py) and the `ls` page
(bot/rendering/ls_page.py): wording, escaping and Block Kit limits with any
values. Pure: no process."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.rendering.ls_page import LS_MORE, LS_PAGE, SessionRow, list_title, session_list_page
from bot.rendering.terminal import as_text
from bot.rendering.watch import (
    STOP_RESOURCE,
    WatchFacts,
    creating_message,
    idle_resource_alert,
    resource_stop_requested_message,
    resumed_message,
    stalled_message,
    stop_resource_button,
    watch_blocks,
)
from bot.rendering.words import duration_words, money_words, step_words
from bot.simulated.together import make_model_resource, make_session
from bot.training.resources import CostEstimate, ModelResource
from bot.training.rules import rate_words
from bot.training.sessions import TrainingSession
from tests.support import examples
from tests.support.blocks import (
    INJECTIONS,
    MENTION,
    PERMALINK,
    PERMALINK_TOKEN,
    TRUSTED_MENTION_RE,
    assert_inert,
    assert_valid,
    buttons,
)
from tests.support.untrusted import PROPERTY_SETTINGS, sessions, untrusted

NOW = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
SID = "123e4567-e89b-12d3-a456-426614174000"


def session(**over: Any) -> TrainingSession:
    return TrainingSession.model_validate(make_session(SID, now=NOW, **over))


def resource(status: str = "READY", id: str = "res-1", **over: Any) -> ModelResource:
    return ModelResource.model_validate(make_model_resource(id, status, now=NOW, **over))


def text(message: dict[str, Any]) -> str:
    """What a reader sees, without the bold marks."""
    return as_text(message).replace("*", "")


def test_words() -> None:
    assert duration_words(timedelta(minutes=15)) == "15 min"
    assert duration_words(timedelta(minutes=125)) == "2 h 5 min"
    assert duration_words(timedelta(hours=2)) == "2 h"
    assert duration_words(timedelta(days=3, hours=4, minutes=9)) == "3 d 4 h"
    assert duration_words(timedelta(seconds=-5)) == "0 min"
    assert step_words(1234) == "1,234" and step_words(None) == "—"
    assert step_words(12345678901234567) == "12,345,678,901,234,567"
    assert rate_words(12.345) == "12 steps/min" and rate_words(0.25) == "0.25 steps/min"
    assert rate_words(1234.5) == "1,234 steps/min" and rate_words(0.001) == "under 0.01 steps/min"
    assert rate_words(None) is None and rate_words(float("nan")) is None
    assert rate_words(-1.0) is None
    assert money_words(12.5, "USD") == "$12.50" and money_words(1234.4, "usd") == "$1,234"
    assert money_words(3.0, "EUR") == "3.00 EUR" and money_words(3.0, "<x>") == "3.00 &lt;X&gt;"
    assert money_words(float("inf"), "USD") is None and money_words(-1.0, "USD") is None


def test_stalled_message_says_what_the_issue_asks() -> None:
    msg = stalled_message(
        session(step="1234"),
        step=1234,
        since=NOW - timedelta(minutes=15),
        stalled_for=timedelta(minutes=15),
        idles_out_at=NOW + timedelta(minutes=45),
    )
    assert_valid(msg)
    shown = text(msg)
    assert "No progress for 15 min: step 1,234 since 2026-03-01T10:45:00Z" in shown
    assert "the training client may have stopped" in shown
    assert "the resource idles out at 2026-03-01T11:45:00Z" in shown
    assert "no progress for 15 min (step 1,234)" in msg["text"]


def test_stalled_on_call_page_has_the_mention_and_the_thread() -> None:
    msg = stalled_message(
        session(),
        step=42,
        since=NOW,
        stalled_for=timedelta(minutes=20),
        idles_out_at=None,
        mention=MENTION,
        permalink=PERMALINK,
    )
    assert_valid(msg)
    assert_inert(msg, MENTION, PERMALINK_TOKEN)
    assert msg["text"].startswith(MENTION)
    assert PERMALINK_TOKEN in msg["blocks"][-1]["text"]["text"]


def test_resumed_and_creating_messages() -> None:
    resumed = resumed_message(
        session(), old_step=1234, new_step=1240, stalled_for=timedelta(minutes=25)
    )
    assert_valid(resumed)
    assert "Progress resumed: step 1,234 → 1,240 after 25 min without progress" in text(resumed)
    pending = resource("PENDING")
    creating = creating_message(
        session(status="CREATING"), waited=timedelta(minutes=31), resource=pending
    )
    assert_valid(creating)
    assert "Still creating after 31 min" in text(creating)
    assert "Queue position: 3" in text(creating) and "queue position 3" in creating["text"]
    alone = creating_message(session(status="CREATING"), waited=timedelta(hours=1), resource=None)
    assert "Queue position" not in text(alone)


def test_card_watch_section() -> None:
    facts = WatchFacts(
        resource=resource(
            "READY", compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 2}
        ),
        price=CostEstimate(currency="USD", price_per_hour=63.0),
        ready_seconds=1800,
        rate=12.3,
        target=2000,
        eta=NOW + timedelta(hours=2),
        stalled_since=NOW - timedelta(minutes=20),
        idle_since=None,
    )
    blocks = watch_blocks(facts, step=1234)
    msg = {"text": "card", "blocks": blocks}
    assert_valid(msg)
    shown = text(msg)
    assert "No progress since 2026-03-01T10:40:00Z (step 1,234)" in shown
    assert "Resource: :large_green_circle: Ready (billing)" in shown
    assert "GPUs: B200-SXM · 2 generator replicas" in shown
    assert "Stops if inactive at: 2026-03-01T12:00:00Z" in shown
    assert "Price: $63.00/h" in shown
    assert "Spend so far (estimate): ≈ $31.50" in shown
    assert "Progress: 12 steps/min" in shown
    assert "Target: step 2,000, ETA 2026-03-01T13:00:00Z" in shown
    assert "Spend is an estimate" in shown


def test_card_watch_section_pending_and_nothing() -> None:
    pending = watch_blocks(WatchFacts(resource=resource("PENDING")))
    shown = text({"text": "x", "blocks": pending})
    assert "Queue position: 3" in shown and "Stops if inactive" not in shown
    assert "estimate" not in shown  # no price, no spend
    assert watch_blocks(WatchFacts()) == []
    trainer_only = resource(compute_config={"num_generator_replicas": 0})
    assert "GPUs: trainer only" in text(
        {"text": "x", "blocks": watch_blocks(WatchFacts(resource=trainer_only))}
    )


def test_idle_resource_alert_has_the_stop_button_behind_a_confirm() -> None:
    ready = resource("READY")
    used = [session(status="STOPPED")]
    msg = idle_resource_alert(
        ready,
        idle_since=NOW - timedelta(minutes=20),
        now=NOW,
        sessions=used,
        price=CostEstimate(price_per_hour=25.0),
        mention=MENTION,
    )
    assert_valid(msg)
    assert_inert(msg, MENTION)
    shown = text(msg)
    assert "Model resource idle for 20 min" in shown and "Price: $25.00/h" in shown
    assert "grpo-123e4567" in shown and "Stopped" in shown
    stop = buttons(msg)[STOP_RESOURCE]
    assert stop["value"] == "res-1" and stop["style"] == "danger" and "confirm" in stop
    # Not READY any more: nothing to stop.
    gone = idle_resource_alert(resource("STOPPED"), idle_since=NOW, now=NOW)
    assert STOP_RESOURCE not in buttons(gone)


def test_resource_stop_requested() -> None:
    msg = resource_stop_requested_message("U123ABC", resource("STOPPING"))
    assert_valid(msg)
    assert "<@U123ABC> asked Together to stop model resource" in msg["blocks"][0]["text"]["text"]
    assert "Stopping" in msg["text"]


def _rows(n: int, status: str = "RUNNING") -> list[SessionRow]:
    return [
        SessionRow(
            session=TrainingSession.model_validate(
                make_session(f"{i:08d}-e89b-12d3-a456-426614174000", status, now=NOW)
            ),
            rate=1.5,
            resource=resource(),
            stalled=i % 7 == 0,
            idle_resource=i % 11 == 0,
        )
        for i in range(n)
    ]


def test_ls_page_of_a_hundred_rows_with_buttons_and_more() -> None:
    msg = session_list_page(
        _rows(LS_PAGE), title=list_title("running", "mine", None), now=NOW, more_value="cursor-1"
    )
    assert_valid(msg)
    found = buttons(msg)
    assert sum(k.startswith("rl_subscribe.") for k in found) == 100
    assert sum(k.startswith("rl_stop.") for k in found) == 100
    assert found["rl_subscribe.1"]["value"] == "00000000-e89b-12d3-a456-426614174000"
    assert "confirm" in found["rl_stop.100"]
    assert found[LS_MORE]["value"] == "cursor-1"
    shown = text(msg)
    assert "Running sessions · mine" in shown
    assert "1. :arrow_forward: Running" in shown and "step 42" in shown and "1.5 steps/min" in shown
    assert ":warning: stalled" in shown and ":money_with_wings: idle resource" in shown
    assert "age 30 min" in shown


def test_ls_numbers_continue_on_later_pages_and_finished_rows_have_no_stop() -> None:
    msg = session_list_page(_rows(3, "STOPPED"), title="All sessions", now=NOW, first_number=201)
    found = buttons(msg)
    assert set(found) == {"rl_subscribe.201", "rl_subscribe.202", "rl_subscribe.203"}
    assert "sessions 201–203." in msg["text"]
    empty = session_list_page([], title="All sessions", now=NOW)
    assert_valid(empty)
    assert "No training sessions match" in text(empty)


def test_ls_more_than_a_page_is_counted_not_dropped() -> None:
    msg = session_list_page(_rows(130), title="All sessions", now=NOW)
    assert_valid(msg)
    assert "…and 30 more not shown" in text(msg)


def test_list_title_escapes_the_model() -> None:
    assert list_title("error", "<@U1>", "<!channel>") == (
        "Sessions in error · &lt;@U1&gt; · model &lt;!channel&gt;"
    )


def test_stop_resource_button_escapes_its_id() -> None:
    button = stop_resource_button("<!channel>")
    assert "&lt;!channel&gt;" in button["confirm"]["text"]["text"]


# --- any values -------------------------------------------------------------------------------

_number = st.one_of(st.none(), st.integers(), st.text(max_size=8))
_times = st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)))


@st.composite
def resources(draw: st.DrawFn) -> ModelResource:
    return ModelResource.model_validate(
        {
            "id": draw(st.one_of(st.just("res-1"), untrusted)),
            "status": draw(
                st.one_of(
                    st.sampled_from(
                        [f"MODEL_RESOURCES_STATUS_{s}" for s in ("PENDING", "READY", "STOPPED")]
                    ),
                    untrusted,
                )
            ),
            "base_model": draw(st.one_of(st.none(), untrusted)),
            "created_by": draw(st.one_of(st.none(), untrusted)),
            "compute_config": {
                "gpu_type": draw(st.one_of(st.none(), untrusted)),
                "num_generator_replicas": draw(_number),
            },
            "status_details": {"queue_position": draw(_number)},
            "expires_at": draw(st.one_of(st.none(), untrusted, st.just("2026-01-02T00:00:00Z"))),
        }
    )


prices = st.builds(
    CostEstimate,
    currency=st.one_of(st.just("USD"), untrusted),
    price_per_hour=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
)
deltas = st.timedeltas(min_value=timedelta(days=-400), max_value=timedelta(days=4000))


@PROPERTY_SETTINGS
@given(
    s=sessions(),
    step=st.one_of(st.none(), st.integers()),
    since=st.datetimes(timezones=st.just(UTC)),
    stalled_for=deltas,
    idles=_times,
    mention=st.one_of(st.none(), st.just(MENTION), untrusted),
    permalink=st.one_of(st.none(), st.just(PERMALINK), untrusted),
)
def test_stall_messages_always_valid_and_inert(
    s: TrainingSession,
    step: int | None,
    since: datetime,
    stalled_for: timedelta,
    idles: datetime | None,
    mention: str | None,
    permalink: str | None,
) -> None:
    msg = stalled_message(
        s,
        step=step,
        since=since,
        stalled_for=stalled_for,
        idles_out_at=idles,
        mention=mention,
        permalink=permalink,
    )
    assert_valid(msg)
    trusted = [PERMALINK_TOKEN] if permalink == PERMALINK else []
    if mention is not None and TRUSTED_MENTION_RE.fullmatch(mention):
        trusted.append(mention)
    assert_inert(msg, *trusted)
    resumed = resumed_message(s, old_step=step, new_step=step, stalled_for=stalled_for)
    assert_valid(resumed)
    assert_inert(resumed)


@PROPERTY_SETTINGS
@given(
    s=sessions(),
    r=st.one_of(st.none(), resources()),
    price=st.one_of(st.none(), prices),
    ready=st.one_of(st.none(), st.floats(allow_nan=True)),
    rate=st.one_of(st.none(), st.floats(allow_nan=True)),
    target=st.one_of(st.none(), st.integers()),
    budget=st.one_of(st.none(), st.floats(allow_nan=True)),
    when=_times,
    waited=deltas,
    user=untrusted,
)
def test_watch_messages_always_valid_and_inert(
    s: TrainingSession,
    r: ModelResource | None,
    price: CostEstimate | None,
    ready: float | None,
    rate: float | None,
    target: int | None,
    budget: float | None,
    when: datetime | None,
    waited: timedelta,
    user: str,
) -> None:
    facts = WatchFacts(
        resource=r,
        price=price,
        ready_seconds=ready,
        rate=rate,
        target=target,
        eta=when,
        budget=budget,
        stalled_since=when,
        idle_since=when,
    )
    section = {"text": "card", "blocks": watch_blocks(facts, step=s.step)}
    assert_valid(section)
    assert_inert(section)
    creating = creating_message(s, waited=waited, resource=r)
    assert_valid(creating)
    assert_inert(creating)
    if r is not None:
        for msg in (
            idle_resource_alert(
                r, idle_since=NOW - waited, now=NOW, sessions=[s] * 12, price=price
            ),
            resource_stop_requested_message(user, r),
        ):
            assert_valid(msg)
            assert_inert(msg)


@settings(
    max_examples=examples(40),  # each example renders up to 120 rows: keep the quick loop quick
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(
        st.builds(
            SessionRow,
            session=sessions(),
            rate=st.one_of(st.none(), st.floats(allow_nan=True)),
            resource=st.one_of(st.none(), resources()),
            stalled=st.booleans(),
            idle_resource=st.booleans(),
        ),
        max_size=12,
    ),
    copies=st.integers(1, 10),
    status=st.sampled_from(["running", "creating", "error", "all", "x"]),
    who=st.one_of(st.none(), untrusted),
    model=st.one_of(st.none(), untrusted),
    more=st.one_of(st.none(), st.text(max_size=2100)),
    first=st.integers(1, 10**6),
)
def test_ls_page_always_valid_and_inert(
    rows: list[SessionRow],
    copies: int,
    status: str,
    who: str | None,
    model: str | None,
    more: str | None,
    first: int,
) -> None:
    msg = session_list_page(
        rows * copies,
        title=list_title(status, who, model),
        now=NOW,
        first_number=first,
        more_value=more,
    )
    assert_valid(msg)
    assert_inert(msg)


@pytest.mark.parametrize("injection", INJECTIONS)
def test_injections_in_resource_fields_are_inert(injection: str) -> None:
    r = resource(
        "READY",
        id=injection or "x",
        base_model=injection,
        created_by=injection,
        compute_config={"gpu_type": injection, "num_generator_replicas": 1},
    )
    msg = idle_resource_alert(
        r, idle_since=NOW, now=NOW, price=CostEstimate(currency=injection, price_per_hour=1.0)
    )
    assert_valid(msg)
    assert_inert(msg)


def test_with_watch_puts_the_section_before_the_buttons_and_keeps_the_limit() -> None:
    from bot.rendering import card
    from bot.rendering.watch import with_watch

    base = card(session(), subscribed=True)
    facts = WatchFacts(rate=3.0, stalled_since=NOW)
    shown = with_watch(base, facts, step=42)
    assert_valid(shown)
    kinds = [b["type"] for b in shown["blocks"]]
    at = kinds.index("actions")
    assert "No progress* since" in json.dumps(shown["blocks"][at - 2])
    assert len(shown["blocks"]) == len(base["blocks"]) + 2
    assert with_watch(base, WatchFacts()) == base
    full = {"text": "x", "blocks": [{"type": "divider"}] * 49 + base["blocks"][-2:-1]}
    assert len(with_watch(full, facts, step=1)["blocks"]) == 50


def test_a_stall_says_when_the_idle_out_time_is_an_estimate() -> None:
    common: dict[str, Any] = {
        "step": 1234,
        "since": NOW - timedelta(minutes=15),
        "stalled_for": timedelta(minutes=15),
        "idles_out_at": NOW + timedelta(minutes=45),
    }
    exact = text(stalled_message(session(), **common))
    assert "the resource idles out at 2026-03-01T11:45:00Z." in exact
    assert "estimate" not in exact
    guess = stalled_message(session(), idles_out_estimated=True, **common)
    assert_valid(guess)
    shown = text(guess)
    assert "the resource idles out at about 2026-03-01T11:45:00Z (estimated: the last step" in shown
