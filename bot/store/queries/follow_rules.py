"""Follow rules and their claims: the queries `/rl-session follow`, App Home,
`list` and the discovery job run on `follow_rules` and `follow_claims`.

The database decides what replicas would otherwise race for: the unique key on
a channel's rule makes a repeated rule a no-op, and a claim (one row per
channel and session, inserted ignoring a conflict) is taken by exactly one
replica, so a session is subscribed once per channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.store.engine import insert_ignoring, rows_touched
from bot.store.tables import FollowClaim, FollowRule, PersonalAlerts, Subscription, db_now

#: the most rules one channel may hold
MAX_RULES_PER_CHANNEL = 20


async def channel_rules(
    db: AsyncSession, *, team_id: str, channel_id: str, active_only: bool = True
) -> list[FollowRule]:
    """A channel's rules, oldest first (its `list`)."""
    where = [FollowRule.team_id == team_id, FollowRule.channel_id == channel_id]
    if active_only:
        where.append(FollowRule.active.is_(True))
    rows = await db.execute(select(FollowRule).where(*where).order_by(FollowRule.id))
    return list(rows.scalars())


async def creator_rules(db: AsyncSession, *, user_id: str, limit: int = 50) -> list[FollowRule]:
    """The rules a person made, in every channel, switched off ones too (their App Home)."""
    rows = await db.execute(
        select(FollowRule)
        .where(FollowRule.created_by == user_id)
        .order_by(FollowRule.id.desc())
        .limit(limit)
    )
    return list(rows.scalars())


async def active_rules(db: AsyncSession) -> list[FollowRule]:
    """Every rule in force, oldest first (what a discovery pass matches)."""
    rows = await db.execute(
        select(FollowRule).where(FollowRule.active.is_(True)).order_by(FollowRule.id)
    )
    return list(rows.scalars())


async def anyone_following(db: AsyncSession) -> bool:
    """Whether any rule is in force or any personal switch is on: discovery's
    first question, one cheap read while nobody follows anything."""
    rule = exists().where(FollowRule.active.is_(True))
    switch = exists().where(PersonalAlerts.enabled.is_(True))
    return bool((await db.execute(select(rule | switch))).scalar_one())


async def count_active(db: AsyncSession, *, team_id: str, channel_id: str) -> int:
    return int(
        (
            await db.execute(
                select(func.count())
                .select_from(FollowRule)
                .where(
                    FollowRule.team_id == team_id,
                    FollowRule.channel_id == channel_id,
                    FollowRule.active.is_(True),
                )
            )
        ).scalar_one()
    )


def model_key(model: str) -> str:
    """A rule's `model=` as compared: base model names are matched ignoring case,
    so a rule is found, refused as a repeat and removed ignoring case too."""
    return model.casefold()


async def find_rule(
    db: AsyncSession, *, team_id: str, channel_id: str, selector: str, model: str
) -> FollowRule | None:
    """The channel's rule of `selector` and `model` (ignoring case), if any."""
    rules = await _selector_rules(db, team_id=team_id, channel_id=channel_id, selector=selector)
    return next((r for r in rules if model_key(r.model) == model_key(model)), None)


async def remove_rules(
    db: AsyncSession, *, team_id: str, channel_id: str, selector: str, model: str | None
) -> int:
    """Delete a channel's rules of `selector` (of `model` only, ignoring case, when
    given); how many. Their claims stay: a session a rule took is not taken again
    by a later rule."""
    rules = await _selector_rules(db, team_id=team_id, channel_id=channel_id, selector=selector)
    ids = [r.id for r in rules if model is None or model_key(r.model) == model_key(model)]
    if not ids:
        return 0
    result = await db.execute(
        delete(FollowRule)
        .where(FollowRule.id.in_(ids))
        .execution_options(synchronize_session=False)
    )
    return rows_touched(result)


async def _selector_rules(
    db: AsyncSession, *, team_id: str, channel_id: str, selector: str
) -> list[FollowRule]:
    """A channel's rules of one selector (at most MAX_RULES_PER_CHANNEL in force):
    compared in Python, with the same case folding as discovery's matching."""
    rows = await db.execute(
        select(FollowRule).where(
            FollowRule.team_id == team_id,
            FollowRule.channel_id == channel_id,
            FollowRule.selector == selector,
        )
    )
    return list(rows.scalars())


async def switch_off(
    db: AsyncSession, *, team_id: str, channel_id: str, reason: str
) -> list[FollowRule]:
    """Switch off a channel's rules in force (the bot cannot post there); the rules
    switched off by this call, to tell their creators once."""
    rules = (
        (
            await db.execute(
                select(FollowRule)
                .where(
                    FollowRule.team_id == team_id,
                    FollowRule.channel_id == channel_id,
                    FollowRule.active.is_(True),
                )
                .with_for_update(skip_locked=True)
            )
        )
        .scalars()
        .all()
    )
    for rule in rules:
        rule.active, rule.ended_reason = False, reason[:200]
    return list(rules)


async def claim(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_ids: Sequence[str],
    rule_id: int,
    owner: str,
) -> list[str]:
    """Claim these sessions for a channel; the ones this call claimed (not claimed
    before, by any rule or replica, and not already subscribed there, active or
    ended: an unsubscribed session stays so). One statement each way."""
    if not session_ids:
        return []
    wanted = list(dict.fromkeys(session_ids))
    subscribed = set(
        (
            await db.execute(
                select(Subscription.session_id).where(
                    Subscription.team_id == team_id,
                    Subscription.channel_id == channel_id,
                    Subscription.session_id.in_(wanted),
                )
            )
        ).scalars()
    )
    now = (await db.execute(select(db_now()))).scalar_one()
    taken: list[str] = []
    for session_id in wanted:
        result = await db.execute(
            insert_ignoring(db, FollowClaim.__table__).values(
                team_id=team_id,
                channel_id=channel_id,
                session_id=session_id,
                rule_id=rule_id,
                claimed_by=owner,
                claimed_at=now,
            )
        )
        fresh = rows_touched(result) == 1
        if fresh and session_id not in subscribed:
            taken.append(session_id)
    return taken


async def unclaimed(
    db: AsyncSession, *, team_id: str, channel_id: str, session_ids: Sequence[str]
) -> list[str]:
    """Which of these sessions the channel's rules have not claimed yet (a read,
    to count what a rule would take before claiming at most its cap)."""
    if not session_ids:
        return []
    claimed = set(
        (
            await db.execute(
                select(FollowClaim.session_id).where(
                    FollowClaim.team_id == team_id,
                    FollowClaim.channel_id == channel_id,
                    FollowClaim.session_id.in_(list(session_ids)),
                )
            )
        ).scalars()
    )
    return [s for s in session_ids if s not in claimed]


async def release_claim(
    db: AsyncSession, *, team_id: str, channel_id: str, session_id: str
) -> None:
    """Give a claim back (its channel is gone, its rules switched off): a rule made
    there again may take the session."""
    await db.execute(
        delete(FollowClaim).where(
            FollowClaim.team_id == team_id,
            FollowClaim.channel_id == channel_id,
            FollowClaim.session_id == session_id,
            ~exists().where(
                Subscription.team_id == team_id,
                Subscription.channel_id == channel_id,
                Subscription.session_id == session_id,
            ),
        )
    )


async def due_retries(
    db: AsyncSession, *, team_id: str, channel_id: str, session_ids: Sequence[str]
) -> list[str]:
    """Which of these sessions the channel claimed, failed to subscribe for a
    passing reason, and may try again now (by the database's clock)."""
    if not session_ids:
        return []
    due = set(
        (
            await db.execute(
                select(FollowClaim.session_id).where(
                    FollowClaim.team_id == team_id,
                    FollowClaim.channel_id == channel_id,
                    FollowClaim.session_id.in_(list(session_ids)),
                    FollowClaim.retry_at <= db_now(),
                )
            )
        ).scalars()
    )
    return [s for s in session_ids if s in due]


async def retake(
    db: AsyncSession, *, team_id: str, channel_id: str, session_ids: Sequence[str], owner: str
) -> list[str]:
    """Take these due retries for this try (settled unless it fails again); the
    ones still due and not subscribed there meanwhile, by hand."""
    taken: list[str] = []
    for session_id in session_ids:
        result = await db.execute(
            update(FollowClaim)
            .where(
                FollowClaim.team_id == team_id,
                FollowClaim.channel_id == channel_id,
                FollowClaim.session_id == session_id,
                FollowClaim.retry_at <= db_now(),
                ~exists().where(
                    Subscription.team_id == team_id,
                    Subscription.channel_id == channel_id,
                    Subscription.session_id == session_id,
                ),
            )
            .values(retry_at=None, claimed_by=owner)
            .execution_options(synchronize_session=False)
        )
        if rows_touched(result) == 1:
            taken.append(session_id)
        else:  # subscribed by hand meanwhile: settled, not due any more
            await db.execute(
                update(FollowClaim)
                .where(
                    FollowClaim.team_id == team_id,
                    FollowClaim.channel_id == channel_id,
                    FollowClaim.session_id == session_id,
                )
                .values(retry_at=None)
                .execution_options(synchronize_session=False)
            )
    return taken


async def claim_failed(
    db: AsyncSession,
    *,
    team_id: str,
    channel_id: str,
    session_id: str,
    retry_in: Callable[[int], float | None],
) -> int:
    """Count one more passing failure of a claim's subscription; it is tried again
    `retry_in(attempts)` seconds from now, or never (None: given up, the claim
    stays). How many failures in a row it has had."""
    claim_row = await db.get(FollowClaim, (team_id, channel_id, session_id))
    if claim_row is None:
        return 0
    attempts = claim_row.attempts + 1
    delay = retry_in(attempts)
    await db.execute(
        update(FollowClaim)
        .where(
            FollowClaim.team_id == team_id,
            FollowClaim.channel_id == channel_id,
            FollowClaim.session_id == session_id,
        )
        .values(attempts=attempts, retry_at=None if delay is None else db_now(delay))
        .execution_options(synchronize_session=False)
    )
    return attempts


async def old_claims(db: AsyncSession, *, before: datetime) -> list[str]:
    """The sessions of claims made before `before` (retention's candidates)."""
    rows = await db.execute(
        select(FollowClaim.session_id).where(FollowClaim.claimed_at < before).distinct()
    )
    return list(rows.scalars())


async def prune_claims(db: AsyncSession, *, session_ids: Sequence[str], before: datetime) -> int:
    """Drop these sessions' claims made before `before`: sessions no longer live,
    where a claim no longer matters (one kept while its session lives keeps a
    channel that unsubscribed from being subscribed again)."""
    if not session_ids:
        return 0
    result = await db.execute(
        delete(FollowClaim)
        .where(FollowClaim.claimed_at < before, FollowClaim.session_id.in_(list(session_ids)))
        .execution_options(synchronize_session=False)
    )
    return rows_touched(result)


async def set_cap_told(db: AsyncSession, rule_id: int, told: bool) -> None:
    await db.execute(
        update(FollowRule)
        .where(FollowRule.id == rule_id)
        .values(cap_told=told)
        .execution_options(synchronize_session=False)
    )


async def revive(db: AsyncSession, rule: FollowRule, *, values: dict[str, object]) -> None:
    """Switch a switched-off rule back on, as made now with `values`."""
    await db.execute(
        update(FollowRule)
        .where(FollowRule.id == rule.id)
        .values(active=True, ended_reason=None, **values)
        .execution_options(synchronize_session=False)
    )
