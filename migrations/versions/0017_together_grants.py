"""together_grants: the request budget's books, shared by every replica

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "together_grants",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_together_grants")),
    )
    op.create_index("ix_together_grants_at", "together_grants", ["at"])


def downgrade() -> None:
    op.drop_index("ix_together_grants_at", table_name="together_grants")
    op.drop_table("together_grants")
