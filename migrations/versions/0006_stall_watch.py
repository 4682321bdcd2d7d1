"""stall watch: a session's observed progress, a subscription's stall threshold

`watched_sessions.progress` keeps the step as the bot's polls saw it (when it
last moved, the measured rate); `subscriptions.stall_after_minutes` is a
thread's own stall threshold (`subscribe <id> stall=30m`; 0 off, NULL the
default). What was told is not stored: the outbox's dedupe keys name each
stall episode, so it is told once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 02:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("progress", sa.JSON(), nullable=True))
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stall_after_minutes", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("stall_after_minutes")
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.drop_column("progress")
