"""watched session fingerprint: the Together row the stored state was built from

A poll whose row hashes the same as the stored fingerprint changes nothing but
the progress, so it is not parsed or trimmed again. NULL: not known (the next
poll builds the state whole and stores it).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fingerprint", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watched_sessions", schema=None) as batch_op:
        batch_op.drop_column("fingerprint")
