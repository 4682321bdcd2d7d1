"""drop write-only columns

Watched sessions kept the last `updated_at`, the error's key and message and
the checkpoint counts beside the snapshot that already holds them; nothing
read them. Incidents had a `detail` nothing wrote. The outbox's `kind` and
`state` stay strings: the application reads them as enums.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.drop_column("last_updated_at")
        batch_op.drop_column("error_key")
        batch_op.drop_column("error_message")
        batch_op.drop_column("training_checkpoints")
        batch_op.drop_column("inference_checkpoints")
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.drop_column("detail")


def downgrade() -> None:
    with op.batch_alter_table("incidents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detail", sa.String(length=300), nullable=True))
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("inference_checkpoints", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("training_checkpoints", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("error_message", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("error_key", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("last_updated_at", sa.Text(), nullable=True))
