"""End to end: notification filters, checkpoint events, the guarded Stop
button, the org-wide error watch, mute, App Home and the daily digest, each
through a real `rl-bot serve` process, signed Slack requests and the fake Slack
and Together servers on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.simulated import FakeSlack, FakeTogether, make_session
from tests.support import BotFactory, BotProcess, query, wait_until
from tests.support.home import click_home, open_home

SID = "123e4567-e89b-12d3-a456-426614174000"
SID2 = "223e4567-e89b-12d3-a456-426614174000"
SID3 = "323e4567-e89b-12d3-a456-426614174000"
SID4 = "423e4567-e89b-12d3-a456-426614174000"
OPS = "COPS"
LIST_PATH = "/v1/rl/training-sessions?"

_tokens = itertools.count()


# --- helpers -------------------------------------------------------------------------


def ask(
    bot: BotProcess, slack: FakeSlack, text: str, *, channel: str = "C123", user: str = "U123"
) -> dict[str, Any]:
    """Run `/rl-session <text>`; the answer given in the ack, or else via response_url."""
    token = f"t{next(_tokens)}"
    r = bot.command(text, response_url=slack.response_url(token), channel_id=channel, user_id=user)
    assert r.status_code == 200, r.text
    if r.content.strip():
        answer: dict[str, Any] = r.json()
        return answer
    return slack.wait_for_response(token)


def said(message: dict[str, Any] | None) -> str:
    return json.dumps(message or {}, ensure_ascii=False)


def roots(slack: FakeSlack, channel: str) -> list[str]:
    return [c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts]


def thread_posts(slack: FakeSlack, channel: str, root: str) -> list[str]:
    """Thread replies: fallback text plus blocks, one string each."""
    return [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts(channel)
        if c.thread_ts == root
    ]


def root_updates(slack: FakeSlack, channel: str, root: str) -> list[str]:
    return [json.dumps(u.blocks or [], ensure_ascii=False) for u in slack.updates(channel, root)]


def subscribe(
    bot: BotProcess,
    slack: FakeSlack,
    sid: str,
    *,
    filters: str = "",
    channel: str = "C123",
    user: str = "U123",
) -> str:
    """Subscribe and return the root message ts."""
    answer = ask(bot, slack, f"subscribe {sid} {filters}".strip(), channel=channel, user=user)
    assert "Subscribed" in said(answer), answer
    return [c.ts for c in slack.successful_posts(channel) if c.thread_ts is None and c.ts][-1]


def polls(together: FakeTogether, sid: str, n: int = 2, timeout: float = 30.0) -> None:
    """Wait until the poller fetched `sid` n more times (so it saw what changed)."""
    start = together.requests_for(sid)
    wait_until(lambda: together.requests_for(sid) >= start + n, timeout=timeout, what=f"{n} polls")


def list_requests(together: FakeTogether) -> list[str]:
    with together._lock:
        return [p for p in together.paths if p.startswith(LIST_PATH)]


def watch_runs(together: FakeTogether, n: int, timeout: float = 30.0) -> None:
    """Wait for n more first-page list requests, i.e. n more org-wide watch cycles."""

    def first_pages() -> int:
        return sum(1 for p in list_requests(together) if "after=" not in p)

    start = first_pages()
    wait_until(lambda: first_pages() >= start + n, timeout=timeout, what=f"{n} watch cycles")


def db_filters(db_url: str, sid: str, channel: str = "C123") -> list[tuple[Any, ...]]:
    return query(
        db_url,
        "SELECT filters, active FROM subscriptions WHERE session_id = :s AND channel_id = :c",
        s=sid,
        c=channel,
    )


def as_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_lines(bot: BotProcess) -> list[dict[str, Any]]:
    lines = []
    for raw in bot.log().splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue
    return lines


def elements(blocks: list[Any] | None) -> list[dict[str, Any]]:
    """Every button in actions blocks and section accessories."""
    found: list[dict[str, Any]] = []
    for block in blocks or []:
        found += [e for e in block.get("elements") or [] if isinstance(e, dict)]
        if isinstance(block.get("accessory"), dict):
            found.append(block["accessory"])
    return found


# --- filters and checkpoint events -------------------------------------------------------


@pytest.mark.backend_independent("which changes a thread is told; filters are stored as text")
def test_checkpoints_filter_tells_checkpoints_in_one_message_and_not_status(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    session = make_session(SID, display_name="ckpt-run")
    session["inference_checkpoints"][0].pop("registration")  # registered later
    together.put(session)
    root = subscribe(bot, slack, SID, filters="checkpoints")
    assert db_filters(db_url, SID) == [("checkpoints", True)]

    # One new training checkpoint, and a registration appearing on the existing
    # inference checkpoint: told once, together.
    later = make_session(SID, display_name="ckpt-run")
    registered_id = later["inference_checkpoints"][0]["id"]
    later["training_checkpoints"].append(
        {"id": "ckpt-train-new-1", "step": 20, "created_at": iso(datetime.now(UTC))}
    )
    together.put(later)
    wait_until(lambda: thread_posts(slack, "C123", root), what="checkpoint message")
    [told] = thread_posts(slack, "C123", root)
    assert "ckpt-train-new-1" in told and "step 20" in told
    assert registered_id in told and "registered" in told
    assert "2 new checkpoint events" in told

    # A burst of three checkpoints in one cycle is one message naming all three.
    burst = [f"ckpt-burst-{i}" for i in range(3)]
    for i, cid in enumerate(burst):
        later["training_checkpoints"].append({"id": cid, "step": 30 + i})
    together.put(later)
    wait_until(lambda: len(thread_posts(slack, "C123", root)) >= 2, what="burst message")
    polls(together, SID, 2)
    posts = thread_posts(slack, "C123", root)
    assert len(posts) == 2, posts
    assert all(cid in posts[1] for cid in burst)
    assert "3 new checkpoint events" in posts[1]

    # A status change is not told to a checkpoints-only subscription, but the
    # root card still shows it.
    together.set_status(SID, "STOPPING")
    wait_until(
        lambda: any("Stopping" in u for u in root_updates(slack, "C123", root)),
        what="root updated to Stopping",
    )
    polls(together, SID, 2)
    assert len(thread_posts(slack, "C123", root)) == 2
    assert query(db_url, "SELECT kind FROM outbox WHERE kind = 'root'") == [("root",)]


def test_errors_only_filter_list_and_changing_filters(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID, display_name="alpha-run")
    together.add(SID2, display_name="beta-run")
    root = subscribe(bot, slack, SID)
    subscribe(bot, slack, SID2, filters="checkpoints status")
    assert db_filters(db_url, SID) == [("status", True)]
    assert db_filters(db_url, SID2) == [("checkpoints,status", True)]

    # Subscribing again with other filters changes them; no new root message.
    answer = ask(bot, slack, f"subscribe {SID} errors-only")
    assert "now: errors-only" in said(answer)
    assert answer.get("response_type") == "ephemeral"
    assert db_filters(db_url, SID) == [("errors-only", True)]
    assert len(roots(slack, "C123")) == 2

    listed = said(ask(bot, slack, "list"))
    assert "filters: errors-only" in listed
    assert "filters: checkpoints, status" in listed

    together.set_status(SID, "STOPPING")
    wait_until(
        lambda: any("Stopping" in u for u in root_updates(slack, "C123", root)),
        what="root updated to Stopping",
    )
    polls(together, SID, 2)
    assert thread_posts(slack, "C123", root) == []

    together.set_status(SID, "ERROR")
    wait_until(lambda: thread_posts(slack, "C123", root), what="error told")
    [told] = thread_posts(slack, "C123", root)
    assert "Stopping" in told and "Error" in told


@pytest.mark.backend_independent("which changes a thread is told; filters are stored as text")
def test_subscribe_button_keeps_the_channels_filters(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    subscribe(bot, slack, SID, filters="checkpoints")
    # Someone presses Subscribe on a card shown in the same channel.
    bot.click(
        "rl_subscribe",
        SID,
        response_url=slack.response_url("btn"),
        message_ts="1700000000.000123",
        is_ephemeral=False,
    )
    assert "already subscribed" in said(slack.wait_for_response("btn"))
    assert db_filters(db_url, SID) == [("checkpoints", True)]
    assert len(roots(slack, "C123")) == 1


@pytest.mark.backend_independent("input refused before anything is stored")
def test_bad_filters_are_refused_and_store_nothing(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    answer = ask(bot, slack, f"subscribe {SID} loud")
    assert answer.get("response_type") == "ephemeral"
    assert "Unknown filter" in said(answer) and "errors-only" in said(answer)
    answer = ask(bot, slack, f"subscribe {SID} status errors-only")
    assert answer.get("response_type") == "ephemeral"
    assert "not both" in said(answer)
    assert query(db_url, "SELECT count(*) FROM subscriptions") == [(0,)]
    assert slack.successful_posts() == []
    assert together.requests_for(SID) == 0  # refused before asking Together


@pytest.mark.backend_independent("which changes a thread is told; filters are stored as text")
def test_step_changes_and_unwanted_checkpoints_are_not_told_but_the_root_shows_the_step(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID, step=42)
    root = subscribe(bot, slack, SID)  # default filters: status only
    assert db_filters(db_url, SID) == [("status", True)]
    session = together.get(SID)
    assert session is not None
    session["step"] = 4321
    # a new checkpoint too: not wanted by a status-only subscription
    session["training_checkpoints"].append({"id": "ckpt-unwanted", "step": 4321})
    together.put(session)

    def seen_step() -> bool:
        rows = query(db_url, "SELECT snapshot FROM watched_sessions")
        return bool(rows) and as_json(rows[0][0]).get("step") == 4321

    wait_until(seen_step, what="poller saw the new step")
    polls(together, SID, 2)
    assert thread_posts(slack, "C123", root) == []
    assert query(db_url, "SELECT count(*) FROM outbox") == [(0,)]

    together.set_status(SID, "STOPPING")
    wait_until(lambda: thread_posts(slack, "C123", root), what="status change told")
    wait_until(lambda: root_updates(slack, "C123", root), what="root updated")
    assert "4321" in root_updates(slack, "C123", root)[-1]


# --- the Stop button ---------------------------------------------------------------------


def _stop_buttons(blocks: list[Any] | None) -> list[dict[str, Any]]:
    return [e for e in elements(blocks) if e.get("action_id") == "rl_stop"]


@pytest.mark.backend_independent("the Stop allowlist; the database only stores")
def test_stop_refused_when_not_enabled_for_users_not_allowed_and_for_bad_values(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    together.add(SID)
    together.add(SID2, status="STOPPED")
    bot = start_bot()
    root = subscribe(bot, slack, SID)

    # The card of a RUNNING session has a Stop button that asks first.
    [post] = slack.successful_posts("C123")
    [button] = _stop_buttons(post.blocks)
    assert button["value"] == SID and button["style"] == "danger"
    assert {"title", "text", "confirm", "deny"} <= set(button["confirm"])
    stopped_card = ask(bot, slack, SID2)
    assert _stop_buttons(stopped_card.get("blocks")) == []  # nothing to stop

    token = "stop-off"
    bot.click("rl_stop", SID, response_url=slack.response_url(token), message_ts=root)
    refusal = said(slack.wait_for_response(token))
    assert "not enabled" in refusal and "Stop allowlist" in refusal
    bot.stop()

    bot = start_bot(STOP_ALLOWED_USER_IDS="U123,U456")
    token = "stop-u999"
    bot.click("rl_stop", SID, response_url=slack.response_url(token), user_id="U999")
    answer = slack.wait_for_response(token)
    assert "not allowed" in said(answer)
    assert answer.get("response_type") == "ephemeral"

    before = together.total_requests
    for i, value in enumerate(["../x", f"{SID}/../{SID2}", ""]):
        token = f"stop-bad-{i}"
        bot.click("rl_stop", value, response_url=slack.response_url(token))
        assert "not a session id" in said(slack.wait_for_response(token))
    assert together.stop_requests == []
    # no POST but the card's price (estimate-cost, which changes nothing)
    assert not any(r.method == "POST" and r.route != "estimate" for r in together.requests)
    assert not any("x" in p.rsplit("/", 1)[-1] or "/stop" in p for p in together.paths[before:])
    assert any(
        line.get("msg") == "stop refused" and line.get("user_id") == "U999"
        for line in log_lines(bot)
    )


@pytest.mark.backend_independent("the Stop allowlist; the database only stores")
def test_stop_by_an_allowed_user_is_sent_told_in_the_thread_and_logged(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    bot = start_bot(STOP_ALLOWED_USER_IDS="U123")
    together.add(SID, display_name="stop-me")
    together.add(SID2, display_name="stop-me-too")
    root = subscribe(bot, slack, SID)
    [card] = slack.successful_posts("C123")

    # Clicked on the subscription's root card: told in its thread.
    token = "stop-root"
    bot.click(
        "rl_stop",
        SID,
        response_url=slack.response_url(token),
        message_ts=root,
        is_ephemeral=False,
        message={"ts": root, "blocks": card.blocks},
    )
    replaced = slack.wait_for_response(token)
    assert together.stop_requests == [SID]
    assert replaced.get("replace_original") is True and "Stopping" in said(replaced)
    assert "rl_unsubscribe" in said(replaced)  # still the subscribed card
    wait_until(
        lambda: any("<@U123>" in p and "stop" in p for p in thread_posts(slack, "C123", root)),
        what="who stopped it, in the thread",
    )
    logged = [m for m in log_lines(bot) if m.get("msg") == "session stop requested"]
    assert len(logged) == 1
    assert logged[0]["user_id"] == "U123" and logged[0]["session_id"] == SID
    assert logged[0]["together_status"] == "TRAINING_SESSION_STATUS_STOPPING"
    assert logged[0]["ts"]  # when

    # Clicked on an in-channel card with no subscription: told under that message.
    shown = "1700000000.000777"
    token = "stop-card"
    bot.click(
        "rl_stop",
        SID2,
        response_url=slack.response_url(token),
        channel_id="C9",
        message_ts=shown,
        is_ephemeral=False,
    )
    slack.wait_for_response(token)
    assert together.stop_requests == [SID, SID2]
    [note] = thread_posts(slack, "C9", shown)
    assert "<@U123>" in note

    # Together refuses (no such session): the user is told it was not stopped.
    token = "stop-missing"
    bot.click("rl_stop", SID3, response_url=slack.response_url(token), channel_id="C9")
    answer = said(slack.wait_for_response(token))
    assert "not stopped" in answer and "no training session" in answer
    assert any(
        m.get("msg", "").startswith("stop failed") and m.get("together") == "not_found"
        for m in log_lines(bot)
    )
    assert len(slack.successful_posts("C9")) == 1


@pytest.mark.backend_independent("Slack's user-group answer; the database only stores")
def test_stop_allowed_by_user_group_membership(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    slack.usergroups["S1"] = ["U777"]
    bot = start_bot(STOP_ALLOWED_USERGROUP="S1")
    together.add(SID)
    root = subscribe(bot, slack, SID)

    bot.click("rl_stop", SID, response_url=slack.response_url("g-u123"), message_ts=root)
    assert "not allowed" in said(slack.wait_for_response("g-u123"))
    assert together.stop_requests == []

    bot.click("rl_stop", SID, response_url=slack.response_url("g-u777"), user_id="U777")
    slack.wait_for_response("g-u777")
    assert together.stop_requests == [SID]
    checks = slack.calls_to("usergroups.users.list")
    assert len(checks) == 2 and all(c.params.get("usergroup") == "S1" for c in checks)
    wait_until(
        lambda: any("<@U777>" in p for p in thread_posts(slack, "C123", root)),
        what="U777 named in the thread",
    )


# --- the org-wide error watch ------------------------------------------------------------


def test_error_watch_alerts_new_errors_once_not_history(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    day_ago = datetime.now(UTC) - timedelta(days=1)
    together.add(SID, status="ERROR", error={"message": "old failure", "occurred_at": iso(day_ago)})
    together.add(SID2, status="ERROR")  # occurred just now, but before the watch began
    together.add(SID3, display_name="unwatched-run")
    together.add(SID4, display_name="watched-run")
    bot = start_bot(WATCH_ALL_ERRORS="true", ONCALL_CHANNEL=OPS)
    watch_runs(together, 2)
    assert slack.successful_posts(OPS) == []

    # An unsubscribed session enters ERROR: one alert, and not again.
    together.set_status(SID3, "ERROR")
    wait_until(lambda: slack.successful_posts(OPS), what="on-call alert")
    watch_runs(together, 3)
    [alert] = slack.successful_posts(OPS)
    assert "unwatched-run" in said({"t": alert.text, "b": alert.blocks})
    assert together.requests_for(SID3) == 0  # found by listing, never polled one by one

    # A subscribed session entering ERROR: the poller and the watch both see it,
    # and on-call still gets exactly one alert.
    root = subscribe(bot, slack, SID4)
    together.set_status(SID4, "ERROR")
    wait_until(lambda: thread_posts(slack, "C123", root), what="thread reply")
    wait_until(lambda: len(slack.successful_posts(OPS)) >= 2, what="second alert")
    watch_runs(together, 2)
    alerts = slack.successful_posts(OPS)
    assert len(alerts) == 2, [a.text for a in alerts]
    assert "watched-run" in said({"t": alerts[1].text, "b": alerts[1].blocks})
    assert "archives/C123/" in said({"b": alerts[1].blocks})  # links the thread
    keys = query(db_url, "SELECT dedupe_key FROM outbox WHERE kind = 'oncall' ORDER BY id")
    assert [k[0].split(":")[1] for k in keys] == [SID3, SID4]


@pytest.mark.backend_independent("Together's pages; the told-once rows are tested on both")
def test_error_watch_paginates_and_is_bounded_per_cycle(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    long_ago = iso(datetime.now(UTC) - timedelta(hours=3))
    for i in range(150):
        together.add(
            f"e{i:07d}-0000-0000-0000-000000000000",
            status="ERROR",
            error={"message": "old", "occurred_at": long_ago},
        )
    bot = start_bot(WATCH_ALL_ERRORS="true", ONCALL_CHANNEL=OPS)
    watch_runs(together, 2)
    paths = list_requests(together)
    assert all("limit=100" in p and "status[]=TRAINING_SESSION_STATUS_ERROR" in p for p in paths)
    follow = [p for p in paths if "after=" in p]
    assert follow and all("after=e0000099-" in p for p in follow)
    assert slack.successful_posts(OPS) == []  # 150 errors from before the watch
    bot.stop()

    together.reset_counts()
    start_bot(WATCH_ALL_ERRORS="true", ONCALL_CHANNEL=OPS, WATCH_ALL_MAX_PAGES="1")
    watch_runs(together, 3)
    time.sleep(0.5)  # a follow-up page would have come right after
    paths = list_requests(together)
    assert len(paths) >= 3 and not any("after=" in p for p in paths)


@pytest.mark.backend_independent("Together's cursor; the told-once rows are tested on both")
def test_error_watch_follows_meta_cursor_to_an_error_on_page_3(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether
) -> None:
    """The real list answer keeps `has_more`/`next_cursor` under `meta`: the watch
    must follow it past page 1 (pages of 100) to find a new error on page 3."""
    long_ago = iso(datetime.now(UTC) - timedelta(hours=3))
    old = {"code": "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED", "message": "old"}
    for i in range(210):
        together.add(
            f"p{i:07d}-0000-0000-0000-000000000000",
            status="ERROR",
            checkpoints=0,
            error={**old, "occurred_at": long_ago},
        )
    late = "f0000000-0000-0000-0000-000000000210"
    together.add(late, display_name="page-three-run", checkpoints=0)
    start_bot(WATCH_ALL_ERRORS="true", ONCALL_CHANNEL=OPS)
    watch_runs(together, 2)
    assert slack.successful_posts(OPS) == []  # 210 errors from before the watch

    together.set_status(
        late,
        "ERROR",
        error={
            "code": "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
            "message": "no operation for an hour",
            "occurred_at": iso(datetime.now(UTC)),
        },
    )
    wait_until(lambda: slack.successful_posts(OPS), what="alert for the error on page 3")
    watch_runs(together, 2)
    [alert] = slack.successful_posts(OPS)
    told = said({"t": alert.text, "b": alert.blocks})
    assert "page-three-run" in told and "Timed out" in told and late in told
    paths = list_requests(together)
    assert all("status[]=TRAINING_SESSION_STATUS_ERROR" in p and "limit=100" in p for p in paths)
    assert any("after=p0000099-" in p for p in paths)  # page 2
    assert any("after=p0000199-" in p for p in paths)  # page 3
    assert together.requests_for(late) == 0  # found by listing, never polled one by one


# --- mute --------------------------------------------------------------------------------


def test_mute_holds_thread_updates_but_not_on_call_and_unmute_resumes(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(ONCALL_CHANNEL=OPS)
    together.add(SID, display_name="quiet-run")
    together.add(SID2, display_name="failing-run")
    root = subscribe(bot, slack, SID)
    root2 = subscribe(bot, slack, SID2)

    answer = ask(bot, slack, f"mute {SID} 2h")
    assert "muted this thread until" in said(answer)
    [muted] = thread_posts(slack, "C123", root)
    assert "<@U123>" in muted and "muted this thread until" in muted and "<!date^" in muted
    [(until,)] = query(db_url, "SELECT muted_until FROM subscriptions WHERE session_id = :s", s=SID)
    until_dt = until if isinstance(until, datetime) else datetime.fromisoformat(str(until))
    expected = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2)
    assert abs((until_dt - expected).total_seconds()) < 60
    assert "muted until" in said(ask(bot, slack, "list"))

    together.set_status(SID, "STOPPING")
    wait_until(
        lambda: any("Stopping" in u for u in root_updates(slack, "C123", root)),
        what="root updated while muted",
    )
    polls(together, SID, 2)
    assert len(thread_posts(slack, "C123", root)) == 1  # only the mute notice

    # Errors still reach on-call while muted.
    ask(bot, slack, f"mute {SID2} 1d")
    together.set_status(SID2, "ERROR")
    wait_until(lambda: slack.successful_posts(OPS), what="on-call alert while muted")
    wait_until(
        lambda: any("Error" in u for u in root_updates(slack, "C123", root2)),
        what="root2 updated",
    )
    assert len(thread_posts(slack, "C123", root2)) == 1  # only the mute notice
    assert "failing-run" in (slack.successful_posts(OPS)[0].text or "")

    answer = ask(bot, slack, f"unmute {SID}")
    assert "unmuted" in said(answer)
    assert "unmuted" in thread_posts(slack, "C123", root)[-1]
    assert query(db_url, "SELECT muted_until FROM subscriptions WHERE session_id = :s", s=SID) == [
        (None,)
    ]
    together.set_status(SID, "STOPPED")
    wait_until(lambda: len(thread_posts(slack, "C123", root)) == 3, what="told after unmute")
    assert "Stopped" in thread_posts(slack, "C123", root)[-1]


@pytest.mark.backend_independent("input refused before anything is stored")
def test_bad_mute_durations_are_refused(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID)
    root = subscribe(bot, slack, SID)
    for duration in ("forever", "0m", "31d", "-1h", "2 h", "1y"):
        answer = ask(bot, slack, f"mute {SID} {duration}")
        assert answer.get("response_type") == "ephemeral", duration
        assert "not a duration I accept" in said(answer) or "takes a session id" in said(answer)
        assert "at most 30 days" in said(answer)
    assert "not subscribed" in said(ask(bot, slack, f"mute {SID2} 1h"))
    assert query(db_url, "SELECT muted_until FROM subscriptions") == [(None,)]
    assert thread_posts(slack, "C123", root) == []
    assert "not subscribed" in said(ask(bot, slack, f"mute {SID} 30d", channel="C999"))
    # Unmuting a thread that is not muted is no news: the user is told, the thread is not.
    assert "not muted" in said(ask(bot, slack, f"unmute {SID}"))
    assert thread_posts(slack, "C123", root) == []


# --- App Home ----------------------------------------------------------------------------


def published(slack: FakeSlack, user: str) -> list[dict[str, Any]]:
    return [
        as_json(c.params.get("view"))
        for c in slack.successful("views.publish")
        if c.params.get("user_id") == user
    ]


@pytest.mark.backend_independent("App Home's view")
def test_app_home_lists_subscriptions_and_created_sessions(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    assert make_session(SID)["created_by"] == "user_123"
    bot = start_bot(CREATED_BY_USER_MAP="user_123=U123,someone=U555")
    together.add(SID, display_name="mine-in-c1")
    together.add(SID2, display_name="mine-in-c2")
    together.add(SID3, display_name="theirs", created_by="someone")
    together.add(SID4, display_name="mine-watched-by-u555")
    subscribe(bot, slack, SID, channel="CHOME1")
    subscribe(bot, slack, SID2, channel="CHOME2")
    subscribe(bot, slack, SID3, channel="CHOME3", user="U555")
    subscribe(bot, slack, SID4, channel="CHOME3", user="U555")

    open_home(bot)
    [view] = slack.wait_for(lambda: published(slack, "U123"), message="views.publish")
    assert view["type"] == "home"
    text = json.dumps(view, ensure_ascii=False)
    subs_part, created_part = text.split("Sessions you created")
    assert "mine-in-c1" in subs_part and "<#CHOME1>" in subs_part
    assert "mine-in-c2" in subs_part and "<#CHOME2>" in subs_part
    assert "theirs" not in subs_part and "mine-watched-by-u555" not in subs_part
    assert subs_part.count("Running") >= 2  # each with its status
    for name in ("mine-in-c1", "mine-in-c2", "mine-watched-by-u555"):
        assert name in created_part, name
    assert "theirs" not in created_part
    ids = dict(query(db_url, "SELECT session_id, id FROM subscriptions"))
    buttons = [e for e in elements(view["blocks"]) if e.get("action_id") == "rl_home_unsubscribe"]
    assert sorted(b["value"] for b in buttons) == sorted([str(ids[SID]), str(ids[SID2])])

    # Only the Home tab is published; opening the Messages tab is not.
    open_home(bot, user="U123", event_id="Ev3", tab="messages")
    open_home(bot, user="U999", event_id="Ev4", tab="messages")
    time.sleep(0.5)
    assert len(slack.successful("views.publish")) == 1

    # Without a map entry, nothing is claimed as created by you.
    open_home(bot, user="U999", event_id="Ev2")
    [other] = slack.wait_for(lambda: published(slack, "U999"), message="views.publish U999")
    assert "You have no subscriptions" in json.dumps(other)
    assert "mine-in-c1" not in json.dumps(other)


@pytest.mark.backend_independent("who may unsubscribe; the database only stores")
def test_app_home_unsubscribe_only_by_the_subscriber(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    together.add(SID, display_name="home-run")
    together.add(SID2, display_name="kept-run")
    root = subscribe(bot, slack, SID, channel="C1")
    subscribe(bot, slack, SID2, channel="C2")
    ids = dict(query(db_url, "SELECT session_id, id FROM subscriptions"))

    # Someone else presses it (a forged value naming U123's subscription): refused.
    click_home(bot, "rl_home_unsubscribe", str(ids[SID]), user="U999")
    slack.wait_for(lambda: published(slack, "U999"), message="U999's home re-published")
    assert query(db_url, "SELECT active FROM subscriptions WHERE id = :i", i=ids[SID]) == [(True,)]
    assert thread_posts(slack, "C1", root) == []
    click_home(bot, "rl_home_unsubscribe", "1; DROP TABLE subscriptions", user="U123")

    click_home(bot, "rl_home_unsubscribe", str(ids[SID]), user="U123")
    wait_until(lambda: published(slack, "U123"), what="U123's home re-published")
    [view] = published(slack, "U123")
    assert "kept-run" in json.dumps(view) and "home-run" not in json.dumps(view)
    assert query(db_url, "SELECT session_id, active FROM subscriptions ORDER BY id") == [
        (SID, False),
        (SID2, True),
    ]
    wait_until(
        lambda: any("unsubscribed" in p for p in thread_posts(slack, "C1", root)),
        what="unsubscribe said in the thread",
    )
    assert "<@U123>" in thread_posts(slack, "C1", root)[-1]


# --- the daily digest --------------------------------------------------------------------


@pytest.mark.backend_independent("input refused before anything is stored")
def test_digest_bad_times_zones_and_off(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    bot = start_bot(DEFAULT_TIMEZONE="Asia/Tokyo")
    for text, problem in (
        ("digest on 25:99", "`25:99` is not a time of day"),
        ("digest on 24:00", "is not a time of day"),
        ("digest on 09:00 Not/AZone", "`Not/AZone` is not a time zone"),
        ("digest on 09:00 America", "is not a time zone"),
        ("digest on", "digest on HH:MM"),
        ("digest sometimes", "digest on HH:MM"),
    ):
        answer = ask(bot, slack, text)
        assert answer.get("response_type") == "ephemeral", text
        assert problem in said(answer), (text, answer)
    assert query(db_url, "SELECT count(*) FROM channel_settings") == [(0,)]

    assert "Europe/Berlin" in said(ask(bot, slack, "digest on 9:05 Europe/Berlin"))
    assert query(db_url, "SELECT digest_time, digest_tz, updated_by FROM channel_settings") == [
        ("09:05", "Europe/Berlin", "U123")
    ]
    assert "off" in said(ask(bot, slack, "digest off"))
    assert query(db_url, "SELECT digest_time FROM channel_settings") == [(None,)]
    assert "(Asia/Tokyo)" in said(ask(bot, slack, "digest on 07:30"))  # DEFAULT_TIMEZONE
    assert query(db_url, "SELECT digest_time, digest_tz FROM channel_settings") == [
        ("07:30", "Asia/Tokyo")
    ]
    ask(bot, slack, "digest off")
    assert query(db_url, "SELECT digest_time FROM channel_settings") == [(None,)]
    assert "direct messages" in said(ask(bot, slack, "digest on 09:00", channel="D0001"))


def digests(slack: FakeSlack, channel: str) -> list[str]:
    return [
        (c.text or "") + json.dumps(c.blocks or [], ensure_ascii=False)
        for c in slack.successful_posts(channel)
        if c.thread_ts is None and "Daily digest" in (c.text or "")
    ]


def test_digest_is_sent_at_its_time_once_a_day(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    now = datetime.now(UTC)
    if now.hour == 23 and now.minute == 59:  # keep "today" the same day throughout
        time.sleep(61 - now.second)
    bot = start_bot()
    together.add(SID, display_name="digest-run")
    together.add(SID2, display_name="steady-run")
    root = subscribe(bot, slack, SID)
    subscribe(bot, slack, SID2)
    together.set_status(SID, "STOPPING")
    wait_until(lambda: thread_posts(slack, "C123", root), what="transition told")

    at = datetime.now(UTC).strftime("%H:%M")
    answer = ask(bot, slack, f"digest on {at}")
    assert f"daily digest at {at} (UTC)" in said(answer)
    # The digest job ticks at start and every 30 s; a new replica ticks at once.
    bot.stop()
    bot = start_bot()
    wait_until(lambda: digests(slack, "C123"), timeout=20, what="digest")
    [digest] = digests(slack, "C123")
    today = datetime.now(UTC).date().isoformat()
    assert today in digest
    assert "digest-run" in digest and "steady-run" in digest
    assert "Running → Stopping" in digest and "2 watched sessions, 1 change" in digest
    assert query(db_url, "SELECT last_digest_on FROM channel_settings") == [(today,)]

    # The job runs again (another replica starting ticks at once, and sends C2's
    # digest, which proves it ran) and C123 gets no second digest today.
    ask(bot, slack, f"digest on {at}", channel="C2")
    bot.stop()
    bot = start_bot()
    wait_until(lambda: digests(slack, "C2"), timeout=20, what="C2 digest")
    assert "No sessions are watched" in digests(slack, "C2")[0]
    time.sleep(0.6)
    assert len(digests(slack, "C123")) == 1
    rows = query(db_url, "SELECT channel_id FROM outbox WHERE kind = 'digest' ORDER BY id")
    assert rows == [("C123",), ("C2",)]

    ask(bot, slack, "digest off")
    assert query(db_url, "SELECT digest_time FROM channel_settings WHERE channel_id = 'C123'") == [
        (None,)
    ]


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "America/Los_Angeles"])
def test_digest_time_is_read_in_the_channel_zone(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, zone: str, db_url: str
) -> None:
    """HH:MM is local to the zone given: the current minute there is due now."""
    from zoneinfo import ZoneInfo

    if not db_url.startswith("sqlite"):
        pytest.skip("zone arithmetic is backend-independent; once is enough")
    local = datetime.now(ZoneInfo(zone))
    if local.hour == 23 and local.minute == 59:
        time.sleep(61 - local.second)
        local = datetime.now(ZoneInfo(zone))
    bot = start_bot()
    ask(bot, slack, f"digest on {local.strftime('%H:%M')} {zone}")
    utc_now = datetime.now(UTC).strftime("%H:%M")
    bot.stop()
    start_bot()
    wait_until(lambda: digests(slack, "C123"), timeout=20, what="digest in zone")
    [digest] = digests(slack, "C123")
    assert local.date().isoformat() in digest
    assert utc_now != local.strftime("%H:%M")  # the zone was not ignored


def _zone_just_past_midnight() -> str | None:
    """A zone whose local time is now between 00:00 and 00:50 (or None)."""
    from zoneinfo import ZoneInfo, available_timezones

    now = datetime.now(UTC)
    for name in sorted(available_timezones()):
        local = now.astimezone(ZoneInfo(name))
        if local.hour == 0 and local.minute <= 50:
            return name
    return None


def test_digest_catch_up_window_crosses_midnight(
    start_bot: BotFactory, slack: FakeSlack, together: FakeTogether, db_url: str
) -> None:
    """A 23:59 digest missed by a few minutes is still sent just after midnight
    (dated the day it was due); one missed by more than the hour is not."""
    from zoneinfo import ZoneInfo

    if not db_url.startswith("sqlite"):
        pytest.skip("zone arithmetic is backend-independent; once is enough")
    zone = _zone_just_past_midnight()
    if zone is None:
        pytest.skip("no time zone is just past midnight right now")
    bot = start_bot()
    ask(bot, slack, f"digest on 23:59 {zone}")
    local = datetime.now(ZoneInfo(zone))
    late = (local - timedelta(hours=2)).strftime("%H:%M")
    ask(bot, slack, f"digest on {late} {zone}", channel="C4")
    bot.stop()
    start_bot()  # its digest tick runs at once
    wait_until(lambda: digests(slack, "C123"), timeout=20, what="digest after midnight")
    yesterday = (local - timedelta(days=1)).date().isoformat()
    assert yesterday in digests(slack, "C123")[0]
    rows = query(db_url, "SELECT channel_id, last_digest_on FROM channel_settings ORDER BY 1")
    assert rows == [("C123", yesterday), ("C4", None)]
    assert digests(slack, "C4") == []
