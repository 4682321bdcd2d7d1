"""rules: a channel's metric rules, their state per session, spend budgets

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "metric_rules",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("op", sa.String(length=2), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("hold_seconds", sa.Integer(), nullable=False),
        sa.Column("page", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_rules")),
        sa.UniqueConstraint(
            "team_id", "channel_id", "session_id", "metric", "op", name="uq_metric_rules_rule"
        ),
    )
    op.create_index("ix_metric_rules_channel", "metric_rules", ["channel_id"])
    op.create_table(
        "metric_rule_states",
        sa.Column("rule_id", BigId, autoincrement=False, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("since", sa.DateTime(), nullable=True),
        sa.Column("fired", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("rule_id", "session_id", name=op.f("pk_metric_rule_states")),
    )
    op.create_table(
        "budgets",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.Column("daily", sa.Boolean(), nullable=False),
        sa.Column("told_level", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=True),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budgets")),
        sa.UniqueConstraint("team_id", "channel_id", "session_id", name="uq_budgets_budget"),
    )
    op.create_index("ix_budgets_channel", "budgets", ["channel_id"])


def downgrade() -> None:
    op.drop_index("ix_budgets_channel", table_name="budgets")
    op.drop_table("budgets")
    op.drop_table("metric_rule_states")
    op.drop_index("ix_metric_rules_channel", table_name="metric_rules")
    op.drop_table("metric_rules")
