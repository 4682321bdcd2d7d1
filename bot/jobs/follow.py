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
says so in its channel when it left some for the next run. A channel the bot
can no longer post in (archived, or the bot removed) switches its rules off and
their creators are told.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError

from bot.commands.asker import Asker
from bot.commands.follow import rule_line
from bot.commands.subscribe import first_poll_seconds, subscribe_session
from bot.commands.subscriptions import SubscriptionError
from bot.jobs.follow_match import (
    MAX_NEW_PER_RULE,
    Wanted,
    creators_of,
    filter_saves,
    matching,
    personal_wanted,
    rule_wanted,
)
from bot.rendering.blocks import Message
from bot.rendering.follow import cap_message, switched_off_message
from bot.runtime import Runtime
from bot.store.job_locks import claim_job, release_job, renewing
from bot.store.queries import follow_rules, personal_alerts
from bot.store.queries.watched_sessions import start_watching
from bot.store.tables import FollowRule
from bot.together.errors import TogetherError
from bot.together.list_pass import Listed, Lister, ListPass, list_pass
from bot.together.poll_plan import LIVE_STATUSES
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

#: the job's name (its lock in `jobs`, and what its Together requests are charged to)
FOLLOW_JOB = "follow"
#: Slack's answers that mean the bot can no longer post in a rule's channel
CHANNEL_GONE = frozenset(
    {"is_archived", "channel_is_archived", "not_in_channel", "channel_not_found"}
)
_GONE_WORDS = {
    "is_archived": "the channel is archived.",
    "channel_is_archived": "the channel is archived.",
    "not_in_channel": "I was removed from the channel.",
    "channel_not_found": "I can no longer see the channel.",
}


@dataclass
class DiscoveryState:
    """What discovery keeps between runs in one process."""

    #: Together refused a `created_by` filter (403): list everyone from now on
    filter_refused: bool = False


@dataclass
class Found:
    """What one run listed: who is live, and the full sessions when it listed them."""

    listed: list[Listed] = field(default_factory=list)
    passes: list[ListPass] = field(default_factory=list)

    def session(self, session_id: str) -> TrainingSession | None:
        for done in self.passes:
            if session_id in done:
                return done.session(session_id)
        return None


@dataclass
class Outcome:
    subscribed: int = 0
    personal: int = 0
    capped: int = 0
    switched_off: int = 0


async def discover(rt: Runtime, *, lister: Lister, state: DiscoveryState) -> Outcome:
    """One discovery run (see the module docstring), unless another replica runs one."""
    settings = rt.settings
    async with rt.sessionmaker() as db:
        if not await follow_rules.anyone_following(db):
            return Outcome()
    async with rt.sessionmaker() as db, db.begin():
        if await claim_job(db, FOLLOW_JOB, owner=rt.owner, lease=settings.lease_seconds) is None:
            return Outcome()
    try:
        async with renewing(
            rt.sessionmaker, FOLLOW_JOB, owner=rt.owner, lease=settings.lease_seconds
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
            out.personal += await _apply_switch(rt, person, wanted, found)
        except Exception:
            log.exception("a personal switch could not be applied", extra={"user_id": person})
    return out


async def live_sessions(
    rt: Runtime, *, lister: Lister, state: DiscoveryState, wanted: Sequence[Wanted]
) -> Found:
    """Who is live: the roster of a recent pass that reached the end, else a pass of
    our own (filtered by `created_by` only where that saves requests)."""
    settings = rt.settings
    since = lister.clock() - settings.poll_interval_seconds
    roster = lister.roster(LIVE_STATUSES, since=since)
    if roster is not None and roster.complete:  # one cut short did not show everyone
        return Found(listed=list(roster.listed))
    pages = settings.follow_max_pages
    creators = creators_of(wanted)
    if (
        not state.filter_refused
        and creators is not None
        and filter_saves(
            creators, lister.last_size(LIVE_STATUSES), lister.last_per_page(LIVE_STATUSES)
        )
    ):
        found = Found()
        for creator in sorted(creators):
            done = await list_pass(rt.together, LIVE_STATUSES, max_pages=pages, created_by=creator)
            if done.error is not None and done.error.status == 403:
                log.warning(
                    "Together refused the created_by filter (403); listing everyone instead"
                )
                state.filter_refused = True
                break
            found.passes.append(done)
            found.listed += done.roster().listed
        else:
            return found
    done = await lister.get(LIVE_STATUSES, max_pages=pages, since=lister.clock())
    return Found(listed=list(done.roster().listed), passes=[done])


async def _session(rt: Runtime, found: Found, session_id: str) -> TrainingSession:
    """The whole session: from our own pass when we made one, else one GET."""
    session = found.session(session_id)
    if session is not None:
        return session
    return await rt.together.get_session(session_id, retries=1, max_wait=5.0)


async def _apply_rule(
    rt: Runtime,
    rule: FollowRule,
    wanted: Wanted,
    found: Found,
    *,
    out: Outcome,
    gone: set[tuple[str, str]],
) -> None:
    ids = matching(wanted, found.listed)
    if not ids:
        return
    where = {"team_id": rule.team_id, "channel_id": rule.channel_id}
    async with rt.sessionmaker() as db:
        fresh = await follow_rules.unclaimed(db, session_ids=ids, **where)
    if not fresh:
        return
    take, waiting = fresh[:MAX_NEW_PER_RULE], len(fresh) - MAX_NEW_PER_RULE
    async with rt.sessionmaker() as db, db.begin():
        claimed = await follow_rules.claim(
            db, session_ids=take, rule_id=rule.id, owner=rt.owner, **where
        )
    asker = Asker(rule.team_id, rule.channel_id, rule.created_by)
    for n, session_id in enumerate(claimed):
        try:
            session = await _session(rt, found, session_id)
            await subscribe_session(
                sessionmaker=rt.sessionmaker,
                slack=rt.slack,
                asker=asker,
                session=session,
                first_poll_in=first_poll_seconds(rt.settings),
                filters=rule.filter_set,
                stall_minutes=rule.stall_after_minutes,
            )
            out.subscribed += 1
        except SubscriptionError as exc:
            error = _slack_error(exc)
            if error in CHANNEL_GONE:
                await _release(rt, rule, claimed[n:])
                await _switch_off(rt, rule, reason=_GONE_WORDS[error], out=out)
                gone.add((rule.team_id, rule.channel_id))
                return
            # ended meanwhile, or subscribed a moment ago by hand: the claim stands
            log.info("follow rule did not subscribe a session: %s", exc)
        except Exception as exc:
            # Together or Slack failing for now: the next run takes it again
            log.warning(
                "follow rule could not subscribe a session yet: %s",
                exc if isinstance(exc, TogetherError) else type(exc).__name__,
                extra={"session_id": session_id},
            )
            await _release(rt, rule, [session_id])
    if waiting > 0:
        out.capped += 1
        message = cap_message(rule_line(rule), taken=len(take), waiting=waiting)
        await _post(rt, rule.channel_id, message)


def _slack_error(exc: SubscriptionError) -> str:
    cause = exc.__cause__
    if isinstance(cause, SlackApiError):
        return str(cause.response.get("error") or "")
    return ""


async def _release(rt: Runtime, rule: FollowRule, session_ids: Sequence[str]) -> None:
    async with rt.sessionmaker() as db, db.begin():
        for session_id in session_ids:
            await follow_rules.release_claim(
                db, team_id=rule.team_id, channel_id=rule.channel_id, session_id=session_id
            )


async def _switch_off(rt: Runtime, rule: FollowRule, *, reason: str, out: Outcome) -> None:
    """Switch off every rule of the channel and tell each creator once, in a DM."""
    async with rt.sessionmaker() as db, db.begin():
        off = await follow_rules.switch_off(
            db, team_id=rule.team_id, channel_id=rule.channel_id, reason=reason
        )
    out.switched_off += len(off)
    for each in off:
        log.warning("follow rule switched off: %s", reason, extra={"channel_id": each.channel_id})
        await _post(rt, each.created_by, switched_off_message(rule_line(each), reason=reason))


async def _post(rt: Runtime, channel: str, message: Message) -> None:
    try:
        await rt.slack.chat_postMessage(
            channel=channel,
            text=message["text"],
            blocks=message["blocks"],
            unfurl_links=False,
            unfurl_media=False,
        )
    except SlackApiError as exc:  # told in the logs: nothing else to do
        log.warning("a follow message was refused: %s", exc.response.get("error"))


async def _apply_switch(rt: Runtime, user_id: str, wanted: Wanted, found: Found) -> int:
    """Watch a person's new live sessions for their DMs; how many it took."""
    ids = matching(wanted, found.listed)
    if not ids:
        return 0
    async with rt.sessionmaker() as db, db.begin():
        taken = await personal_alerts.take(
            db, user_id=user_id, session_ids=ids, limit=MAX_NEW_PER_RULE
        )
    watched = 0
    for session_id in taken:
        try:
            session = await _session(rt, found, session_id)
            async with rt.sessionmaker() as db, db.begin():
                await start_watching(db, session, first_poll_in=first_poll_seconds(rt.settings))
            watched += 1
        except Exception as exc:
            log.warning("a personal switch could not watch a session yet: %s", type(exc).__name__)
            async with rt.sessionmaker() as db, db.begin():
                await personal_alerts.untake(db, user_id=user_id, session_id=session_id)
    return watched
