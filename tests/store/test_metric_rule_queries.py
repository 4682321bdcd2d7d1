"""The metric rule queries on a real database: add (bounded per channel, a
changed rule re-armed), remove, list, which rules reach a session through an
active subscription (a `*` rule reaches every one), and the stored states."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.store.queries.metric_rules import (
    MAX_METRIC_RULES,
    add_rule,
    channel_metric_rules,
    metrics_by_session,
    remove_rules,
    rule_states,
    rules_reaching,
    write_rule_states,
)
from bot.store.rule_tables import EVERY_SESSION, RuleStateRow
from bot.training.thresholds import Op, RuleState
from tests.support.store_rows import CHANNEL, TEAM, add_subscription

Maker = async_sessionmaker[AsyncSession]
T0 = datetime(2026, 12, 1, 10, 0)


async def _add(
    db: AsyncSession,
    session_id: str,
    metric: str,
    *,
    op: Op = ">",
    threshold: float = 1.0,
    channel_id: str = CHANNEL,
) -> bool:
    return await add_rule(
        db,
        team_id=TEAM,
        channel_id=channel_id,
        session_id=session_id,
        metric=metric,
        op=op,
        threshold=threshold,
        hold_seconds=0,
        page=False,
        created_by="U1",
    )


async def test_a_channel_holds_at_most_the_limit_but_may_change_a_rule_it_has(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        for i in range(MAX_METRIC_RULES):
            assert await _add(db, "s1", f"m{i}")
        assert not await _add(db, "s1", "one-more")
        # changing the value of a held rule is no new rule
        assert await _add(db, "s1", "m0", threshold=5.0)
        # the limit is per channel
        assert await _add(db, "s1", "one-more", channel_id="C2")
    async with maker() as db:
        rules = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
    assert len(rules) == MAX_METRIC_RULES
    assert (rules[0].metric, rules[0].threshold) == ("m0", 5.0)


async def test_a_changed_rule_starts_armed_and_another_op_is_another_rule(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await _add(db, "s1", "loss")
        [rule] = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
        await write_rule_states(db, {(rule.id, "s1"): RuleState(since=T0, fired=True)})
    async with maker() as db, db.begin():
        assert await rule_states(db, [(rule.id, "s1")]) == {
            (rule.id, "s1"): RuleState(since=T0, fired=True)
        }
        await _add(db, "s1", "loss", threshold=2.0)
        await _add(db, "s1", "loss", op="<")
    async with maker() as db:
        assert await rule_states(db, [(rule.id, "s1")]) == {}
        rules = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
    assert [(r.id == rule.id, r.op, r.threshold) for r in rules] == [
        (True, ">", 2.0),
        (False, "<", 1.0),
    ]


async def test_remove_rules_of_one_metric_or_all_on_the_session_with_their_states(
    maker: Maker,
) -> None:
    async with maker() as db, db.begin():
        await _add(db, "s1", "loss")
        await _add(db, "s1", "loss", op="<")
        await _add(db, "s1", "reward")
        await _add(db, "s2", "loss")
        await _add(db, "s1", "loss", channel_id="C2")
        rules = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
        await write_rule_states(db, {(r.id, r.session_id): RuleState(fired=True) for r in rules})
    async with maker() as db, db.begin():
        assert (
            await remove_rules(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", metric="loss")
            == 2
        )
        left = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
        assert [(r.session_id, r.metric) for r in left] == [("s1", "reward"), ("s2", "loss")]
        assert (
            await remove_rules(db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", metric=None)
            == 1
        )
        assert (
            await remove_rules(db, team_id=TEAM, channel_id=CHANNEL, session_id="s9", metric=None)
            == 0
        )
    async with maker() as db:
        states = (await db.scalars(select(RuleStateRow.session_id))).all()
        on_s2 = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL, session_id="s2")
        other = await channel_metric_rules(db, team_id=TEAM, channel_id="C2")
    assert states == ["s2"]
    assert [r.metric for r in on_s2] == ["loss"]
    assert [r.metric for r in other] == ["loss"]


async def test_rules_reach_sessions_through_active_subscriptions_and_star_reaches_all(
    maker: Maker,
) -> None:
    muted = datetime(2026, 12, 2)
    async with maker() as db, db.begin():
        a = await add_subscription(db, "s1")
        b = await add_subscription(db, "s2", muted_until=muted)
        await add_subscription(db, "s3", active=False)
        await add_subscription(db, "s1", channel_id="C2")
        await _add(db, "s1", "loss")
        await _add(db, EVERY_SESSION, "reward")
        await _add(db, "s3", "loss")  # its subscription ended
        await _add(db, "s1", "kl", channel_id="C3")  # not subscribed there
    async with maker() as db:
        reaching = await rules_reaching(db, ["s1", "s2", "s3"])
        only_loss = await rules_reaching(db, ["s1", "s2"], metrics=["loss"])
        assert await rules_reaching(db, []) == []
    assert [(r.rule.metric, r.session_id, r.subscription_id) for r in reaching] == [
        ("loss", "s1", a.id),
        ("reward", "s1", a.id),
        ("reward", "s2", b.id),
    ]
    assert [(r.channel_id, r.root_ts, r.muted_until) for r in reaching[1:]] == [
        (CHANNEL, a.root_ts, None),
        (CHANNEL, b.root_ts, muted),
    ]
    assert [(r.rule.metric, r.session_id) for r in only_loss] == [("loss", "s1")]
    assert metrics_by_session(reaching) == {"s1": {"loss", "reward"}, "s2": {"reward"}}


async def test_an_armed_state_is_deleted_and_the_rest_replaced(maker: Maker) -> None:
    async with maker() as db, db.begin():
        await write_rule_states(
            db,
            {(1, "s1"): RuleState(since=T0), (1, "s2"): RuleState(since=T0, fired=True)},
        )
    async with maker() as db, db.begin():
        await write_rule_states(db, {(1, "s1"): RuleState(), (1, "s2"): RuleState(fired=True)})
        await write_rule_states(db, {})
    async with maker() as db:
        states = await rule_states(db, [(1, "s1"), (1, "s2"), (2, "s1")])
        assert await rule_states(db, []) == {}
    assert states == {(1, "s2"): RuleState(since=None, fired=True)}


async def test_a_removed_rules_id_never_comes_back(maker: Maker) -> None:
    """Its states rest on the id: a new rule given it could inherit a fired state."""
    async with maker() as db, db.begin():
        assert await _add(db, "s1", "reward")
        [gone] = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
        assert await remove_rules(
            db, team_id=TEAM, channel_id=CHANNEL, session_id="s1", metric=None
        )
    async with maker() as db, db.begin():
        assert await _add(db, "s1", "kl")
    async with maker() as db:
        [new] = await channel_metric_rules(db, team_id=TEAM, channel_id=CHANNEL)
    assert new.id > gone.id, (gone.id, new.id)
