"""Which listed sessions a follow rule or a personal switch takes, and when a
`created_by` filter saves requests: pure rules, no process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.jobs.follow_match import (
    Wanted,
    creators_of,
    filter_saves,
    matching,
    personal_wanted,
    rule_wanted,
    takes,
)
from bot.together.list_pass import Listed

RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
MADE = datetime(2026, 12, 2, 10, 0, 0, 500_000)
MAP = {"user_ana": "U1", "ana_old": "U1", "user_bob": "U2"}


def listed(
    sid: str,
    *,
    by: str = "user_ana",
    model: str = "Qwen/Qwen3.5-4B",
    at: datetime | None = MADE,
    status: str = RUNNING,
) -> Listed:
    return Listed(sid, status, by, model, at.replace(tzinfo=UTC) if at else None)


def rule(selector: str = "all", *, model: str = "", existing: bool = False) -> Wanted:
    wanted = rule_wanted(
        selector=selector, model=model, created_at=MADE, existing=existing, user_map=MAP
    )
    assert wanted is not None
    return wanted


def test_a_rule_takes_sessions_created_from_its_own_second_on() -> None:
    wanted = rule()
    # Together gives whole seconds: a session of the rule's own second is new
    assert takes(wanted, listed("a", at=MADE.replace(microsecond=0)))
    assert takes(wanted, listed("b", at=MADE + timedelta(minutes=1)))
    assert not takes(wanted, listed("c", at=MADE - timedelta(seconds=1)))
    assert not takes(wanted, listed("d", at=None))  # no creation time: not known to be new
    # with `existing`, the ones already live too
    assert takes(rule(existing=True), listed("e", at=MADE - timedelta(days=3)))


def test_only_creating_and_running_sessions_are_taken() -> None:
    wanted = rule(existing=True)
    for status, taken in (
        ("TRAINING_SESSION_STATUS_CREATING", True),
        (RUNNING, True),
        ("TRAINING_SESSION_STATUS_STOPPING", False),
        ("TRAINING_SESSION_STATUS_ERROR", False),
    ):
        assert takes(wanted, listed("s", status=status)) is taken, status


def test_mine_and_a_user_go_through_every_together_id_of_theirs() -> None:
    ana = rule("U1", existing=True)
    assert ana.creators == frozenset({"user_ana", "ana_old"})
    assert takes(ana, listed("a", by="ana_old"))
    assert not takes(ana, listed("b", by="user_bob"))
    assert not takes(ana, listed("c", by=None))  # type: ignore[arg-type]
    assert (
        rule_wanted(selector="U9", model="", created_at=MADE, existing=False, user_map=MAP) is None
    )
    assert personal_wanted("U2", MAP) == Wanted(frozenset({"user_bob"}))
    assert personal_wanted("U9", MAP) is None


def test_model_matches_regardless_of_case() -> None:
    wanted = rule(model="qwen/qwen3.5-4b", existing=True)
    assert takes(wanted, listed("a"))
    assert not takes(wanted, listed("b", model="meta/Llama"))


def test_matching_takes_the_oldest_first() -> None:
    wanted = rule(existing=True)
    found = matching(
        wanted,
        [
            listed("late", at=MADE + timedelta(minutes=2)),
            listed("early", at=MADE - timedelta(minutes=2)),
            listed("theirs", by="user_bob", at=MADE),
            listed("stopping", status="TRAINING_SESSION_STATUS_STOPPING"),
        ],
    )
    assert found == ["early", "theirs", "late"]


def test_a_created_by_filter_only_where_it_saves_requests() -> None:
    ana, bob, everyone = rule("U1"), rule("U2"), rule()
    assert creators_of([ana, bob]) == frozenset({"user_ana", "ana_old", "user_bob"})
    assert creators_of([ana, everyone]) is None
    three = creators_of([ana, bob])
    assert not filter_saves(three, None)  # the project's size is not known yet
    assert not filter_saves(three, 250)  # 3 filtered passes vs 3 pages
    assert filter_saves(three, 301)  # 3 vs 4 pages
    assert filter_saves(three, 7, per_page=2)  # 3 vs 4 pages of the 2 rows the server sends
    assert not filter_saves(None, 10_000)  # someone wants everyone
    assert not filter_saves(frozenset(), 10_000)
