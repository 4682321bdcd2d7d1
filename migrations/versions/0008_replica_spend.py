"""replica spend: the Together request budget is the whole deployment's

One row per replica (its owner id): the requests it sent in the last minute, in
all and other than the poller's, and when it said so by the database's clock.
Each replica's poller takes the other live replicas' spend off the budget.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 04:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replica_spend",
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("others", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", name=op.f("pk_replica_spend")),
    )


def downgrade() -> None:
    op.drop_table("replica_spend")
