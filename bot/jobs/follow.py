"""Discovery: the follow rules and personal switches applied to the live sessions.

Each run reads who is live from the roster of a list pass of the live statuses
(`bot.together.list_pass.Roster`): the poller's when it made one within the
last poll interval, so discovery adds no pass when one runs anyway. With none,
it makes its own: one pass of everyone, or, when no rule wants everyone and
that saves requests, one `created_by` pass per wanted creator (Together
answering 403 to that filter turns it off for this process, and the pass of
everyone is made instead).

One replica discovers at a time (a job lock), and each session is claimed in
the database before it is subscribed (`follow_claims`, `personal_watches`), so
a session is subscribed once per channel and taken once per person whichever
replica finds it. A rule takes at most `MAX_NEW_PER_RULE` sessions a run and
says so in its channel, once for a backlog, when it left some for later runs. A channel the bot
can no longer post in (archived, or the bot removed) switches its rules off and
their creators are told.

A session whose subscription fails for a passing reason keeps its claim and is
tried again on a later run, backing off, a few times at most
(`bot.jobs.follow_retry`); so is discovery's own list pass when it fails. Its
Together requests (its own pass, a GET for each session it did not list whole)
are follow discovery's tier of the request budget (`bot.together.shares`): the
floor kept for it is never taken by the watches below it nor by the poll, so a
new session is subscribed within a window of its listing however busy the budget.
A claim is kept while its session is live, so a channel that unsubscribed stays so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from bot.jobs.follow_live import DiscoveryState, Found, live_sessions
from bot.jobs.follow_match import (
    MAX_NEW_PER_RULE,
    Wanted,
    matching,
    personal_wanted,
    rule_wanted,
)
from bot.jobs.follow_retry import Failure, failure_of, retry_in
from bot.rendering.blocks import Message
from bot.rendering.follow import cap_message, gone_reason, switched_off_message
from bot.runtime import Runtime
from bot.slack_web import SlackApiError
from bot.store.job_locks import claim_job, release_job, renewing
from bot.store.queries import follow_rules, personal_alerts
from bot.store.queries.watched_sessions import start_watching
from bot.store.tables import FollowRule, database_now
from bot.subscriptions.listing import rule_line
from bot.subscriptions.options import ThreadOptions
from bot.subscriptions.service import first_poll_seconds, subscribe
from bot.together.errors import TogetherError
from bot.together.list_pass import Lister
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

#: the job's name (its lock in `jobs`, and what its Together requests are charged to)
FOLLOW_JOB = "follow"
#: how often a process drops the claims of sessions no longer live (retention)
PRUNE_CLAIMS_SECONDS = 3600.0


@dataclass
class Outcome:
    subscribed: int = 0
    personal: int = 0
    capped: int = 0
    switched_off: int = 0
    failed: int = 0


async def discover(rt: Runtime, *, lister: Lister, state: DiscoveryState) -> Outcome:
    """One discovery run (see the module docstring), unless another replica runs one."""
    settings = rt.settings
    async with rt.sessionmaker() as db:
        if not await follow_rules.anyone_following(db):
            return Outcome()
    async with rt.sessionmaker() as db, db.begin():
        if (
            await claim_job(db, FOLLOW_JOB, owner=rt.owner, lease_seconds=settings.lease_seconds)
            is None
        ):
            return Outcome()
    try:
        async with renewing(
            rt.sessionmaker, FOLLOW_JOB, owner=rt.owner, lease_seconds=settings.lease_seconds
        ):
            return await _discover(rt, lister=lister, state=state)
    finally:
        async with rt.sessionmaker() as db, db.begin():
            await release_job(db, FOLLOW_JOB, owner=rt.owner)


async def _discover(rt: Runtime, *, lister: Lister, state: DiscoveryState) -> Outcome:
    user_map = rt.settings.created_by_user_map
    async with rt.sessionmaker() as db:
        rules = await follow_rules.active_rules(db)
        people = await personal_alerts.switched_on(db)
    by_rule = [
        (rule, w)
        for rule in rules
        if (
            w := rule_wanted(
                selector=rule.selector,
                model=rule.model,
                created_at=rule.created_at,
                existing=rule.existing,
                user_map=user_map,
            )
        )
        is not None
    ]
    by_person = [(p, w) for p in people if (w := personal_wanted(p, user_map)) is not None]
    if not by_rule and not by_person:
        return Outcome()
    found = await live_sessions(
        rt, lister=lister, state=state, wanted=[w for _, w in by_rule + by_person]
    )
    await _prune_claims(rt, found, state=state, now=lister.clock())
    out = Outcome()
    gone: set[tuple[str, str]] = set()
    for rule, wanted in by_rule:
        if (rule.team_id, rule.channel_id) in gone:
            continue
        try:
            await _apply_rule(rt, rule, wanted, found, out=out, gone=gone)
        except Exception:  # this rule's; the others still run
            log.exception("a follow rule could not be applied", extra={"rule_id": rule.id})
    for person, wanted in by_person:
        try:
            out.personal += await _apply_switch(
                rt, person, wanted, found, state=state, now=lister.clock()
            )
        except Exception:
            log.exception("a personal switch could not be applied", extra={"user_id": person})
    return out


async def _session(rt: Runtime, found: Found, session_id: str) -> TrainingSession:
    """The whole session: from our own pass when we made one, else one GET."""
    session = found.session(session_id)
    if session is not None:
        return session
    # No retry here: a session that fails is tried again on a later run, backing off.
    return await rt.together.get_session(session_id, max_wait=5.0)


async def _apply_rule(
    rt: Runtime,
    rule: FollowRule,
    wanted: Wanted,
    found: Found,
    *,
    out: Outcome,
    gone: set[tuple[str, str]],
) -> None:
    """Subscribe the rule's channel to its sessions not taken yet and to those due
    for another try, as many as a run takes (the oldest first); a GET the budget
    has no share for yet waits for follow discovery's floor."""
    ids = matching(wanted, found.listed)
    where = {"team_id": rule.team_id, "channel_id": rule.channel_id}
    fresh: list[str] = []
    due: list[str] = []
    if ids:
        async with rt.sessionmaker() as db:
            fresh = await follow_rules.unclaimed(db, session_ids=ids, **where)
            due = await follow_rules.due_retries(db, session_ids=ids, **where)
    take = (due + fresh)[:MAX_NEW_PER_RULE]
    again = set(due)
    new = [s for s in take if s not in again]
    subscribed, failed = 0, 0
    if take:
        async with rt.sessionmaker() as db, db.begin():
            retried = await follow_rules.retake(
                db, session_ids=[s for s in take if s in again], owner=rt.owner, **where
            )
            claimed = await follow_rules.claim(
                db, session_ids=new, rule_id=rule.id, owner=rt.owner, **where
            )
        todo = retried + claimed
        for n, session_id in enumerate(todo):
            kind, error = await _subscribe_one(rt, rule, found, session_id)
            if kind is None:
                subscribed += 1
            elif kind is Failure.CHANNEL_GONE:
                await _release(rt, rule, todo[n:])
                out.switched_off += await _switch_off(rt, rule, reason=gone_reason(error))
                gone.add((rule.team_id, rule.channel_id))
                return
            elif kind is Failure.PASSING:
                failed += 1
        out.subscribed += subscribed
        out.failed += failed
    await _tell_backlog(
        rt,
        rule,
        found=len(fresh),
        waiting=len(fresh) - len(new),
        done=(subscribed, failed),
        out=out,
    )


async def _subscribe_one(
    rt: Runtime, rule: FollowRule, found: Found, session_id: str
) -> tuple[Failure | None, str]:
    """Subscribe the rule's channel to one claimed session: None when it did, else
    the kind of failure (handled here, but for a channel gone) and Slack's error."""
    try:
        session = await _session(rt, found, session_id)
        await subscribe(
            sessionmaker=rt.sessionmaker,
            slack=rt.slack,
            session=session,
            team_id=rule.team_id,
            channel_id=rule.channel_id,
            user_id=rule.created_by,
            first_poll_in=first_poll_seconds(rt.settings),
            options=ThreadOptions.of_rule(rule),
        )
        return None, ""
    except Exception as exc:
        kind, error = failure_of(exc)
        if kind is Failure.CANNOT:  # the claim stands, and nothing is tried again
            log.info("follow rule did not subscribe a session: %s", exc)
        elif kind is Failure.PASSING:
            base = rt.settings.poll_interval_seconds
            async with rt.sessionmaker() as db, db.begin():
                attempts = await follow_rules.claim_failed(
                    db,
                    team_id=rule.team_id,
                    channel_id=rule.channel_id,
                    session_id=session_id,
                    retry_in=lambda n: retry_in(n, base=base),
                )
            log.warning(
                "follow rule could not subscribe a session yet (try %d): %s",
                attempts,
                error or (exc if isinstance(exc, TogetherError) else type(exc).__name__),
                extra={"session_id": session_id},
            )
        return kind, error


async def _tell_backlog(
    rt: Runtime,
    rule: FollowRule,
    *,
    found: int,
    waiting: int,
    done: tuple[int, int],
    out: Outcome,
) -> None:
    """Tell the channel once when its rule found more new sessions than a run
    takes, with what this run did; told again only after it caught up."""
    if waiting > 0 and not rule.cap_told:
        out.capped += 1
        subscribed, failed = done
        message = cap_message(
            rule_line(rule),
            found=found,
            subscribed=subscribed,
            failed=failed,
            waiting=waiting,
            cap=MAX_NEW_PER_RULE,
        )
        await _post(rt, rule.channel_id, message)
    elif not (waiting == 0 and rule.cap_told):
        return
    async with rt.sessionmaker() as db, db.begin():
        await follow_rules.set_cap_told(db, rule.id, waiting > 0)


async def _prune_claims(rt: Runtime, found: Found, *, state: DiscoveryState, now: float) -> None:
    """Drop the claims past WATCH_RETENTION_DAYS whose session is no longer live,
    hourly, when this run's listing shows every live session: a claim is kept
    while its session lives, so a channel that unsubscribed is not subscribed again."""
    if not found.everyone or now - state.claims_pruned_at < PRUNE_CLAIMS_SECONDS:
        return
    state.claims_pruned_at = now
    live = {r.id for r in found.listed}
    async with rt.sessionmaker() as db, db.begin():
        cutoff = await database_now(db) - timedelta(days=rt.settings.watch_retention_days)
        old = [s for s in await follow_rules.old_claims(db, before=cutoff) if s not in live]
        if pruned := await follow_rules.prune_claims(db, session_ids=old, before=cutoff):
            log.info("pruned %d follow claims of sessions no longer live", pruned)


async def _release(rt: Runtime, rule: FollowRule, session_ids: Sequence[str]) -> None:
    async with rt.sessionmaker() as db, db.begin():
        for session_id in session_ids:
            await follow_rules.release_claim(
                db, team_id=rule.team_id, channel_id=rule.channel_id, session_id=session_id
            )


async def _switch_off(rt: Runtime, rule: FollowRule, *, reason: str) -> int:
    """Switch off every rule of the channel and tell each creator once, in a DM;
    how many were switched off."""
    async with rt.sessionmaker() as db, db.begin():
        off = await follow_rules.switch_off(
            db, team_id=rule.team_id, channel_id=rule.channel_id, reason=reason
        )
    for each in off:
        log.warning("follow rule switched off: %s", reason, extra={"channel_id": each.channel_id})
        await _post(rt, each.created_by, switched_off_message(rule_line(each), reason=reason))
    return len(off)


async def _post(rt: Runtime, channel: str, message: Message) -> None:
    try:
        await rt.slack.post(
            channel=channel,
            text=message["text"],
            blocks=message["blocks"],
            unfurl_links=False,
            unfurl_media=False,
        )
    except SlackApiError as exc:  # told in the logs: nothing else to do
        log.warning("a follow message was refused: %s", exc.response.get("error"))


async def _apply_switch(
    rt: Runtime,
    user_id: str,
    wanted: Wanted,
    found: Found,
    *,
    state: DiscoveryState,
    now: float,
) -> int:
    """Watch a person's new live sessions for their DMs; how many it took. One that
    fails is taken again after a back-off (this process remembers), and left after
    `MAX_ATTEMPTS` tries."""
    waits = state.switch_failures
    ids = [s for s in matching(wanted, found.listed) if waits.get((user_id, s), (0, now))[1] <= now]
    if not ids:
        return 0
    async with rt.sessionmaker() as db, db.begin():
        taken = await personal_alerts.take(
            db, user_id=user_id, session_ids=ids, limit=MAX_NEW_PER_RULE
        )
    watched = 0
    for session_id in taken:
        key = (user_id, session_id)
        try:
            session = await _session(rt, found, session_id)
            async with rt.sessionmaker() as db, db.begin():
                await start_watching(db, session, first_poll_in=first_poll_seconds(rt.settings))
            watched += 1
            waits.pop(key, None)
        except Exception as exc:
            failures = waits.get(key, (0, now))[0] + 1
            delay = retry_in(failures, base=rt.settings.poll_interval_seconds)
            log.warning(
                "a personal switch could not watch a session yet (try %d): %s",
                failures,
                type(exc).__name__,
            )
            if delay is None:  # given up: it stays taken
                waits.pop(key, None)
                continue
            waits[key] = (failures, now + delay)
            async with rt.sessionmaker() as db, db.begin():
                await personal_alerts.untake(db, user_id=user_id, session_id=session_id)
    return watched
