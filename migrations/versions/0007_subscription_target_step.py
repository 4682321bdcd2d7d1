"""subscription target step: `subscribe <id> target=2000`

The step a thread waits for; the card shows an ETA for it at the rate the
bot's polls measured. NULL: no target.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 02:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("target_step", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("target_step")
