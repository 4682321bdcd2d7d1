"""follow retries: a claim's passing failures, and a rule's backlog notice

`follow_claims.attempts` and `retry_at`: a session a rule took whose subscription
failed for a passing reason is tried again later, backing off, a few times at
most, instead of being given back (taken again at every pass). `follow_rules.
cap_told`: the channel was told its rule found more sessions than a pass takes,
so the notice is not repeated at every pass of the backlog.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("follow_claims", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("retry_at", sa.DateTime(), nullable=True))
    with op.batch_alter_table("follow_rules", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("cap_told", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("follow_rules", schema=None) as batch_op:
        batch_op.drop_column("cap_told")
    with op.batch_alter_table("follow_claims", schema=None) as batch_op:
        batch_op.drop_column("retry_at")
        batch_op.drop_column("attempts")
