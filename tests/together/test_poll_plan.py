"""The poll plan's pure rules: GETs or list pages, by cost, and the interval the
Together request budget allows."""

from __future__ import annotations

from bot.together.poll_plan import (
    ESTIMATE_TTL_SECONDS,
    Plan,
    Seen,
    budget_interval,
    budget_pages,
    choose,
    justified_pages,
    list_cost,
    max_pages,
    round_cost,
    seen_after,
)

NOW = 1000.0


def _seen(live: int, *, complete: bool = True, missing: float = 0.0, at: float = NOW) -> Seen:
    return Seen(live=live, complete=complete, missing=missing, at=at)


def test_a_few_watched_in_a_large_project_keep_their_gets() -> None:
    seen = _seen(3000)
    assert list_cost(5, seen) == 30
    assert choose(5, seen, now=NOW) is Plan.GET


def test_many_watched_list_the_pages_instead() -> None:
    seen = _seen(2000)
    assert list_cost(2000, seen) == 20
    assert choose(2000, seen, now=NOW) is Plan.LIST
    assert round_cost(2000, seen, Plan.LIST) == 20
    assert round_cost(2000, seen, Plan.GET) == 2000
    assert round_cost(2000, None, Plan.LIST) == 20  # before the first pass: the watched only


def test_sessions_expected_missing_from_the_list_count_as_gets() -> None:
    # 150 watched of 150 live: 2 pages; if a third of them end each cycle, 50 GETs more.
    assert list_cost(150, _seen(150)) == 2
    assert list_cost(150, _seen(150, missing=1 / 3)) == 52
    assert choose(150, _seen(150, missing=1 / 3), now=NOW) is Plan.LIST
    assert choose(60, _seen(150, missing=0.99), now=NOW) is Plan.GET


def test_a_tie_and_a_single_session_go_to_gets() -> None:
    assert choose(2, _seen(150), now=NOW) is Plan.GET  # 2 pages == 2 GETs
    assert choose(1, None, now=NOW) is Plan.GET
    assert choose(1, _seen(1), now=NOW) is Plan.GET


def test_nothing_seen_yet_probes_with_a_list_bounded_by_the_gets_it_replaces() -> None:
    assert choose(5, None, now=NOW) is Plan.LIST
    assert max_pages(5) == 4
    assert max_pages(2000) == 1999
    assert max_pages(1) == 1


def test_a_probe_cut_short_is_a_lower_bound_that_keeps_a_small_team_on_gets() -> None:
    # 5 watched, project of 3,000: the probe reads 4 pages (400 sessions) and stops.
    seen = seen_after(listed=400, complete=False, due=5, missing=0, at=NOW, before=None)
    assert not seen.complete and seen.live == 400
    assert list_cost(5, seen) == 5  # at least 5 pages: no cheaper than 5 GETs
    assert choose(5, seen, now=NOW + 1) is Plan.GET
    # The team grows: now listing pays, and the next pass learns the real size.
    assert choose(500, seen, now=NOW + 1) is Plan.LIST


def test_a_complete_pass_learns_the_share_missing_and_a_partial_one_keeps_the_last() -> None:
    full = seen_after(listed=1990, complete=True, due=2000, missing=10, at=NOW, before=None)
    assert full.missing == 10 / 2000
    partial = seen_after(listed=300, complete=False, due=2000, missing=1700, at=NOW, before=full)
    assert partial.missing == full.missing  # the unread pages are not "missing"


def test_an_old_estimate_is_looked_at_again() -> None:
    seen = _seen(3000, at=NOW)
    assert choose(5, seen, now=NOW + ESTIMATE_TTL_SECONDS - 1) is Plan.GET
    assert choose(5, seen, now=NOW + ESTIMATE_TTL_SECONDS + 1) is Plan.LIST


def test_a_forced_plan_wins() -> None:
    assert choose(2000, _seen(2000), now=NOW, forced=Plan.GET) is Plan.GET
    assert choose(1, None, now=NOW, forced=Plan.LIST) is Plan.LIST


def test_the_budget_stretches_an_expensive_round_and_lets_a_cheap_one_poll_often() -> None:
    kw = {"requests_per_minute": 120.0, "min_seconds": 5.0, "max_seconds": 60.0}
    assert budget_interval(20, **kw) == 10.0  # 2,000 watched by 20 pages: 2 requests/s
    assert budget_interval(5, **kw) == 5.0  # never below the minimum
    assert budget_interval(2000, **kw) == 60.0  # never above POLL_INTERVAL_SECONDS
    assert budget_interval(0, **kw) == 5.0
    assert budget_interval(20, requests_per_minute=0, min_seconds=5, max_seconds=60) == 60.0
    # A maximum below the minimum (tests poll every second) wins.
    assert budget_interval(20, requests_per_minute=120, min_seconds=5, max_seconds=1) == 1.0


def test_the_claim_slack_lengthens_the_gap_only_while_the_budget_sets_the_interval() -> None:
    from bot.poll.pace import due_slack, poll_gap
    from bot.settings.model import Settings

    settings = Settings(_env_file=None, poll_interval_seconds=60, poll_min_interval_seconds=5)
    slack = due_slack(settings)
    assert slack > 0
    # At the fixed ends the tick at the interval's end must claim the session.
    assert poll_gap(60.0, settings) == 60.0
    assert poll_gap(5.0, settings) == 5.0
    # Set by the budget: never polled more often than it allows.
    assert poll_gap(12.0, settings) == 12.0 + slack


def test_a_pass_is_capped_near_what_the_watched_and_live_counts_justify() -> None:
    assert justified_pages(20, None) == 3  # probing: twice the pages and one
    cut = Seen(live=22, complete=False, missing=0.0, at=NOW)
    assert justified_pages(20, cut) == 3  # a cursor that never ends stays at that
    grown = Seen(live=500, complete=False, missing=0.0, at=NOW)
    assert justified_pages(150, grown) == 11  # a big project: doubling each pass
    whole = Seen(live=10_000, complete=True, missing=0.0, at=NOW)
    assert justified_pages(150, whole) == 101  # known size: one page more
    assert budget_pages(requests_per_minute=120, others_per_minute=20, max_seconds=60) == 100
    assert budget_pages(requests_per_minute=120, others_per_minute=200, max_seconds=60) == 1
    assert budget_pages(requests_per_minute=0, others_per_minute=0, max_seconds=60) > 10**6


def test_a_pass_is_costed_in_the_rows_a_page_actually_held() -> None:
    # 12 live on pages of 2 rows: 6 pages, not the 1 that pages of 100 would take.
    short = seen_after(listed=12, complete=True, due=12, missing=0, at=NOW, before=None, per_page=2)
    assert short.per_page == 2
    assert list_cost(12, short) == 6
    assert justified_pages(12, short) == 7  # the pages it fills, and one more
    assert round_cost(12, short, Plan.LIST) == 6
    assert choose(12, short, now=NOW) is Plan.LIST
    assert choose(6, short, now=NOW) is Plan.GET  # 6 pages do not beat 6 GETs
    # A pass of one page says nothing of a page's size: the last estimate is kept.
    again = seen_after(listed=1, complete=True, due=1, missing=0, at=NOW, before=short)
    assert again.per_page == 2
    assert (
        seen_after(listed=1, complete=True, due=1, missing=0, at=NOW, before=None).per_page == 100
    )
