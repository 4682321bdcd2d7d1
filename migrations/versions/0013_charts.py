"""charts: the steps the polls saw, the card's W&B metrics, `chart=end|off`

`progress_points` keeps the step each poll saw of a watched session when it
moved (a progress chart draws it); `session_metrics` what the bot last read of
the session's W&B run for its card; `subscriptions.chart_on_end` whether the
thread gets a final chart when the session ends (on unless `chart=off`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "progress_points",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_progress_points")),
    )
    op.create_index("ix_progress_points_session_seen", "progress_points", ["session_id", "seen_at"])
    op.create_table(
        "session_metrics",
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("read_at", sa.DateTime(), nullable=True),
        sa.Column("view", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_metrics")),
    )
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("chart_on_end", sa.Boolean(), server_default=sa.true(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("chart_on_end")
    op.drop_table("session_metrics")
    op.drop_index("ix_progress_points_session_seen", table_name="progress_points")
    op.drop_table("progress_points")
