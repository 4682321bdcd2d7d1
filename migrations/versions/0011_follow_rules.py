"""follow rules, their claims, and the personal "Tell me about my sessions" switch

`follow_rules` are a channel's standing orders to subscribe to sessions as they
appear; `follow_claims` holds one row per (channel, session) a rule took, so a
session is subscribed once per channel and one unsubscribed is never taken
again. `personal_alerts` is a person's App Home switch, and `personal_watches`
the sessions it took for them (told in a DM).

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-02 06:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "follow_rules",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("selector", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), server_default="", nullable=False),
        sa.Column("filters", sa.String(length=64), server_default="status", nullable=False),
        sa.Column("stall_after_minutes", sa.Integer(), nullable=True),
        sa.Column("existing", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("ended_reason", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_follow_rules")),
        sa.UniqueConstraint(
            "team_id", "channel_id", "selector", "model", name="uq_follow_rules_channel_rule"
        ),
    )
    op.create_index("ix_follow_rules_active", "follow_rules", ["active"])
    op.create_index("ix_follow_rules_created_by", "follow_rules", ["created_by"])
    op.create_table(
        "follow_claims",
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("rule_id", sa.BigInteger(), nullable=True),
        sa.Column("claimed_by", sa.String(length=200), nullable=False),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint(
            "team_id", "channel_id", "session_id", name=op.f("pk_follow_claims")
        ),
    )
    op.create_table(
        "personal_alerts",
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_personal_alerts")),
    )
    op.create_table(
        "personal_watches",
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "session_id", name=op.f("pk_personal_watches")),
    )


def downgrade() -> None:
    op.drop_table("personal_watches")
    op.drop_table("personal_alerts")
    op.drop_table("follow_claims")
    op.drop_index("ix_follow_rules_created_by", table_name="follow_rules")
    op.drop_index("ix_follow_rules_active", table_name="follow_rules")
    op.drop_table("follow_rules")
