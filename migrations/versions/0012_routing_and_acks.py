"""routing and acknowledgements: a subscription's `broadcast=` and `dm=`, and
who took an on-call alert

`subscriptions.broadcast` (errors, ends, all, off; NULL: BROADCAST_ERRORS says)
chooses which thread replies also show in the channel; `subscriptions.dm`
(creator; NULL: none) DMs the session's creator. `alert_acks` holds one row per
acknowledged on-call alert (its outbox row), the first click's.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("broadcast", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("dm", sa.String(length=16), nullable=True))
    op.create_table(
        "alert_acks",
        sa.Column(
            "outbox_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("acked_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("outbox_id", name=op.f("pk_alert_acks")),
    )


def downgrade() -> None:
    op.drop_table("alert_acks")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("dm")
        batch_op.drop_column("broadcast")
