"""`/rl-session follow` and `unfollow`: a channel's standing orders to subscribe
to sessions as they appear, and the personal switch of App Home.

A rule is stored here; the discovery job (`bot.jobs.follow`) applies it. Every
refusal is an answer in words, and a refused rule stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.commands.asker import Asker, Sessionmaker
from bot.commands.follow_query import EVERYONE, FollowSpec, together_users
from bot.rendering.follow import (
    RuleLine,
    follow_cap_reached,
    follow_duplicate,
    followed,
    following,
    unfollowed,
)
from bot.rendering.refusals import DM_PROBLEM, unmapped_answer
from bot.store.errors import Duplicate
from bot.store.queries import follow_rules, personal_alerts
from bot.store.tables import FollowRule, utcnow
from bot.subscriptions.listing import rule_line
from bot.subscriptions.options import filters_text


async def follow_here(
    *,
    sessionmaker: Sessionmaker,
    asker: Asker,
    spec: FollowSpec,
    user_map: Mapping[str, str],
) -> str:
    """Store the rule in the asker's channel; the answer (a refusal starts with
    `:no_entry_sign:`)."""
    if asker.channel_id.startswith("D"):
        return f":no_entry_sign: {DM_PROBLEM}"
    selector = spec.selector(asker.user_id)
    if selector != EVERYONE and not together_users(selector, user_map):
        return f":no_entry_sign: {unmapped_answer(selector, caller=asker.user_id)}"
    model = spec.model or ""
    values: dict[str, object] = {
        "filters": filters_text(spec.options.chosen_filters),
        "stall_after_minutes": spec.options.stall_after_minutes,
        "existing": spec.existing,
        "created_by": asker.user_id,
        "created_at": utcnow(),
    }
    what = followed(selector, caller=asker.user_id, model=model)
    duplicate = follow_duplicate(what)
    try:
        async with sessionmaker() as db, db.begin():
            existing = await follow_rules.find_rule(
                db,
                team_id=asker.team_id,
                channel_id=asker.channel_id,
                selector=selector,
                model=model,
            )
            if existing is not None and existing.active:
                return duplicate
            count = await follow_rules.count_active(
                db, team_id=asker.team_id, channel_id=asker.channel_id
            )
            if count >= follow_rules.MAX_RULES_PER_CHANNEL:
                return follow_cap_reached(count)
            if existing is not None:  # switched off: on again, as made now
                await follow_rules.revive(db, existing, values=values | {"model": model})
            else:
                db.add(
                    FollowRule(
                        team_id=asker.team_id,
                        channel_id=asker.channel_id,
                        selector=selector,
                        model=model,
                        active=True,
                        **values,
                    )
                )
    except Duplicate:  # the same rule, stored a moment ago (a double submit)
        return duplicate
    return following(what, spec.options.chosen_filters, existing=spec.existing)


async def unfollow_here(*, sessionmaker: Sessionmaker, asker: Asker, spec: FollowSpec) -> str:
    """Remove the asker's channel's rules of this selector (and model, when given)."""
    selector = spec.selector(asker.user_id)
    async with sessionmaker() as db, db.begin():
        removed = await follow_rules.remove_rules(
            db,
            team_id=asker.team_id,
            channel_id=asker.channel_id,
            selector=selector,
            model=spec.model,
        )
    return unfollowed(followed(selector, caller=asker.user_id, model=spec.model), removed)


async def channel_rule_lines(*, sessionmaker: Sessionmaker, asker: Asker) -> list[RuleLine]:
    async with sessionmaker() as db:
        rules = await follow_rules.channel_rules(
            db, team_id=asker.team_id, channel_id=asker.channel_id
        )
    return [rule_line(r) for r in rules]


async def home_follow(
    *, sessionmaker: Sessionmaker, user_id: str
) -> tuple[Sequence[RuleLine], bool]:
    """A person's rules in every channel, and whether their switch is on."""
    async with sessionmaker() as db:
        rules = await follow_rules.creator_rules(db, user_id=user_id)
        on = await personal_alerts.switch_on(db, user_id=user_id)
    return [rule_line(r) for r in rules], on


async def set_personal(*, sessionmaker: Sessionmaker, team_id: str, user_id: str, on: bool) -> None:
    """The App Home switch "Tell me about my sessions"."""
    async with sessionmaker() as db, db.begin():
        await personal_alerts.set_switch(db, team_id=team_id, user_id=user_id, enabled=on)
