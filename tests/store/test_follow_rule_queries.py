"""The follow rule queries on a real database: a channel's rules and who made
them, models compared ignoring case, switching off, and the claims that make a
session subscribed once per channel, retried when a passing failure allows."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.queries.follow_rules import (
    active_rules,
    anyone_following,
    channel_rules,
    claim,
    claim_failed,
    count_active,
    creator_rules,
    due_retries,
    find_rule,
    old_claims,
    prune_claims,
    release_claim,
    remove_rules,
    retake,
    revive,
    set_cap_told,
    switch_off,
    unclaimed,
)
from bot.store.queries.personal_alerts import set_switch
from bot.store.tables import FollowClaim, FollowRule, database_now
from tests.support.store_rows import CHANNEL, TEAM, add_subscription

Maker = async_sessionmaker[AsyncSession]


class Where(TypedDict):
    team_id: str
    channel_id: str


WHERE: Where = {"team_id": TEAM, "channel_id": CHANNEL}


async def _rule(
    db: AsyncSession, selector: str = "mine", model: str = "", **over: object
) -> FollowRule:
    values: dict[str, object] = {
        **WHERE,
        "selector": selector,
        "model": model,
        "created_by": "U1",
    }
    rule = FollowRule(**(values | over))
    db.add(rule)
    await db.flush()
    return rule


async def test_channel_creator_and_active_rules_list_what_each_promises(maker: Maker) -> None:
    async with maker() as db, db.begin():
        a = await _rule(db, "mine")
        b = await _rule(db, "all", active=False, ended_reason="channel gone")
        c = await _rule(db, "mine", channel_id="C2", created_by="U2")
        d = await _rule(db, "all", model="Qwen")
    async with maker() as db:
        assert [r.id for r in await channel_rules(db, **WHERE)] == [a.id, d.id]
        assert [r.id for r in await channel_rules(db, **WHERE, active_only=False)] == [
            a.id,
            b.id,
            d.id,
        ]
        # a person's rules in every channel, newest first, switched off ones too
        assert [r.id for r in await creator_rules(db, user_id="U1")] == [d.id, b.id, a.id]
        assert [r.id for r in await creator_rules(db, user_id="U1", limit=1)] == [d.id]
        assert [r.id for r in await active_rules(db)] == [a.id, c.id, d.id]
        assert await count_active(db, **WHERE) == 2
        assert await count_active(db, team_id=TEAM, channel_id="C9") == 0


async def test_anyone_following_needs_a_rule_in_force_or_a_switch_on(maker: Maker) -> None:
    async with maker() as db, db.begin():
        assert not await anyone_following(db)
        await _rule(db, active=False)
        await set_switch(db, team_id=TEAM, user_id="U1", enabled=False)
        assert not await anyone_following(db)
        await set_switch(db, team_id=TEAM, user_id="U1", enabled=True)
        assert await anyone_following(db)
        await set_switch(db, team_id=TEAM, user_id="U1", enabled=False)
        await _rule(db, "all")
        assert await anyone_following(db)


async def test_rules_are_found_and_removed_by_model_ignoring_case(maker: Maker) -> None:
    async with maker() as db, db.begin():
        qwen = await _rule(db, "all", model="Qwen/Qwen3.5-4B")
        await _rule(db, "all", model="meta/Llama")
        mine = await _rule(db, "mine", model="Qwen/Qwen3.5-4B")
        await _rule(db, "all", model="Qwen/Qwen3.5-4B", channel_id="C2")
    async with maker() as db, db.begin():
        found = await find_rule(db, **WHERE, selector="all", model="qwen/QWEN3.5-4b")
        assert found is not None and found.id == qwen.id
        assert await find_rule(db, **WHERE, selector="all", model="qwen") is None
        assert await remove_rules(db, **WHERE, selector="all", model="QWEN/qwen3.5-4B") == 1
        assert await remove_rules(db, **WHERE, selector="all", model="nothing") == 0
    async with maker() as db, db.begin():
        left = [(r.selector, r.model) for r in await channel_rules(db, **WHERE)]
        assert left == [("all", "meta/Llama"), ("mine", "Qwen/Qwen3.5-4B")]
        # without a model, every rule of the selector goes
        assert await remove_rules(db, **WHERE, selector="all", model=None) == 1
    async with maker() as db:
        assert [r.id for r in await channel_rules(db, **WHERE)] == [mine.id]
        assert len(await channel_rules(db, team_id=TEAM, channel_id="C2")) == 1


async def test_switch_off_ends_the_channels_rules_in_force_once(maker: Maker) -> None:
    async with maker() as db, db.begin():
        a = await _rule(db, "mine")
        await _rule(db, "all", active=False, ended_reason="earlier")
        other = await _rule(db, "mine", channel_id="C2")
    async with maker() as db, db.begin():
        off = await switch_off(db, **WHERE, reason="x" * 300)
        assert [r.id for r in off] == [a.id]
    async with maker() as db, db.begin():
        assert await switch_off(db, **WHERE, reason="again") == []
        rules = await channel_rules(db, **WHERE, active_only=False)
        assert [(r.active, r.ended_reason) for r in rules] == [
            (False, "x" * 200),
            (False, "earlier"),
        ]
        kept = await db.get(FollowRule, other.id)
        assert kept is not None and kept.active
        # a switched-off rule is revived as made now
        await revive(db, rules[0], values={"selector": "all", "model": "Qwen"})
        await set_cap_told(db, rules[0].id, True)
    async with maker() as db:
        revived = await db.get(FollowRule, a.id)
    assert revived is not None
    assert (revived.active, revived.ended_reason, revived.selector, revived.model) == (
        True,
        None,
        "all",
        "Qwen",
    )
    assert revived.cap_told


async def test_a_session_is_claimed_once_per_channel_and_never_when_subscribed(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await add_subscription(db, "ended", active=False)
        assert await unclaimed(db, **WHERE, session_ids=["a", "b", "ended"]) == [
            "a",
            "b",
            "ended",
        ]
        taken = await claim(
            db, **WHERE, session_ids=["a", "a", "ended", "b"], rule_id=1, owner="r1"
        )
        assert taken == ["a", "b"]
    async with maker() as db, db.begin():
        # another rule or replica: nothing left to take here; another channel may
        assert await claim(db, **WHERE, session_ids=["a", "b", "c"], rule_id=2, owner="r2") == ["c"]
        assert await claim(
            db, team_id=TEAM, channel_id="C2", session_ids=["a"], rule_id=3, owner="r2"
        ) == ["a"]
        assert await claim(db, **WHERE, session_ids=[], rule_id=2, owner="r2") == []
        assert await unclaimed(db, **WHERE, session_ids=["a", "d", "ended"]) == ["d"]
        assert await unclaimed(db, **WHERE, session_ids=[]) == []
        row = await db.get(FollowClaim, (TEAM, CHANNEL, "a"))
        assert row is not None and (row.rule_id, row.claimed_by) == (1, "r1")


async def test_a_claim_is_given_back_unless_its_session_is_subscribed(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await claim(db, **WHERE, session_ids=["a", "b"], rule_id=1, owner="r1")
        await add_subscription(db, "b")
    async with maker() as db, db.begin():
        await release_claim(db, **WHERE, session_id="a")
        await release_claim(db, **WHERE, session_id="b")
    async with maker() as db:
        assert await unclaimed(db, **WHERE, session_ids=["a", "b"]) == ["a"]


async def test_a_failed_claim_is_retried_when_due_and_given_up_on_none(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await claim(db, **WHERE, session_ids=["a", "b", "c"], rule_id=1, owner="r1")
    async with maker() as db, db.begin():
        assert await claim_failed(db, **WHERE, session_id="a", retry_in=lambda n: 0.0) == 1
        assert await claim_failed(db, **WHERE, session_id="b", retry_in=lambda n: 3600.0) == 1
        assert await claim_failed(db, **WHERE, session_id="c", retry_in=lambda n: None) == 1
        assert await claim_failed(db, **WHERE, session_id="zzz", retry_in=lambda n: 0.0) == 0
    async with maker() as db, db.begin():
        assert await due_retries(db, **WHERE, session_ids=["a", "b", "c"]) == ["a"]
        assert await due_retries(db, **WHERE, session_ids=[]) == []
        assert await retake(db, **WHERE, session_ids=["a", "b"], owner="r2") == ["a"]
    async with maker() as db, db.begin():
        a = await db.get(FollowClaim, (TEAM, CHANNEL, "a"))
        assert a is not None and (a.retry_at, a.claimed_by, a.attempts) == (None, "r2", 1)
        assert await due_retries(db, **WHERE, session_ids=["a"]) == []
        # the count goes on from where it was
        assert await claim_failed(db, **WHERE, session_id="a", retry_in=lambda n: 0.0) == 2


async def test_a_due_retry_subscribed_by_hand_meanwhile_is_settled_not_retaken(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await claim(db, **WHERE, session_ids=["a"], rule_id=1, owner="r1")
        await claim_failed(db, **WHERE, session_id="a", retry_in=lambda n: 0.0)
        await add_subscription(db, "a")
    async with maker() as db, db.begin():
        assert await retake(db, **WHERE, session_ids=["a"], owner="r2") == []
    async with maker() as db:
        row = await db.get(FollowClaim, (TEAM, CHANNEL, "a"))
        assert row is not None and (row.retry_at, row.claimed_by) == (None, "r1")


async def test_old_claims_are_listed_and_pruned_by_session_and_age(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await claim(db, **WHERE, session_ids=["old1", "old2", "new"], rule_id=1, owner="r1")
        await claim(db, team_id=TEAM, channel_id="C2", session_ids=["old1"], rule_id=2, owner="r1")
        now = await database_now(db)
        await db.execute(
            update(FollowClaim)
            .where(FollowClaim.session_id.in_(["old1", "old2"]))
            .values(claimed_at=now - timedelta(days=30))
        )
    before = now - timedelta(days=1)
    async with maker() as db, db.begin():
        assert sorted(await old_claims(db, before=before)) == ["old1", "old2"]
        assert await prune_claims(db, session_ids=["old1", "new"], before=before) == 2
        assert await prune_claims(db, session_ids=[], before=before) == 0
    async with maker() as db:
        left = sorted((await db.scalars(select(FollowClaim.session_id))).all())
    assert left == ["new", "old2"]
