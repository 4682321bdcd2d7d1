"""The tables of a channel's metric rules and spend budgets: the rules as given,
each rule's state per session (the crossing it is in and whether it was told),
and the budgets with the highest level already told.

Their state lives beside the rules, written in the same transaction as the
outbox rows it owes, so a restart or another replica judges from where the last
judgement left off and tells nothing twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.tables import Base, BigId, utcnow

#: a rule's or budget's `session_id` for every session the channel is subscribed to
EVERY_SESSION = "*"


class MetricRule(Base):
    """`/rl-session alert <id>|* <metric> <op> <value> [for <duration>] [page]`."""

    __tablename__ = "metric_rules"
    __table_args__ = (
        UniqueConstraint(
            "team_id", "channel_id", "session_id", "metric", "op", name="uq_metric_rules_rule"
        ),
        Index("ix_metric_rules_channel", "channel_id"),
        # its states rest on the id: SQLite never gives a removed rule's id again
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    # A session id, or "*" (`EVERY_SESSION`).
    session_id: Mapped[str] = mapped_column(String(128))
    metric: Mapped[str] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(2))
    threshold: Mapped[float] = mapped_column(Float())
    hold_seconds: Mapped[int] = mapped_column(Integer(), default=0)
    page: Mapped[bool] = mapped_column(Boolean(), default=False)
    created_by: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)


class RuleStateRow(Base):
    """One rule on one session: when its current crossing began, and whether it was told."""

    __tablename__ = "metric_rule_states"

    rule_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    since: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    fired: Mapped[bool] = mapped_column(Boolean(), default=False)


class Budget(Base):
    """`/rl-session budget <id> $<amount>` (a session's estimated spend) or
    `budget * $<amount>/day` (the channel's, per local day)."""

    __tablename__ = "budgets"
    __table_args__ = (
        UniqueConstraint("team_id", "channel_id", "session_id", name="uq_budgets_budget"),
        Index("ix_budgets_channel", "channel_id"),
        # its warnings are told once by the id: SQLite never gives a removed budget's id again
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    # A session id, or "*" for the channel's daily budget.
    session_id: Mapped[str] = mapped_column(String(128))
    amount: Mapped[float] = mapped_column(Float())
    daily: Mapped[bool] = mapped_column(Boolean(), default=False)
    # The highest level (80, 100) told for `day` (a session budget: for good).
    told_level: Mapped[int] = mapped_column(Integer(), default=0)
    # The daily count's local day (ISO) and, per session, [its spend before the
    # count began, its newest spend seen that day].
    day: Mapped[str | None] = mapped_column(String(10), nullable=True)
    baseline: Mapped[dict[str, Any] | None] = mapped_column(JSON(), nullable=True)
    # who set it and when, last: a replaced budget is set anew
    created_by: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(), default=utcnow)
