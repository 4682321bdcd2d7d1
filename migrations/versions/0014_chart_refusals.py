"""chart_refusals: the workspaces that refused the root card's chart block

A workspace whose Slack answered `invalid_blocks` to the card's
`data_visualization` block gets its cards without it from then on, remembered
here so no replica, before or after a restart, is refused again.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chart_refusals",
        sa.Column("team_id", sa.String(length=32), nullable=False),
        sa.Column("refused_at", sa.DateTime(), nullable=False),
        sa.Column("error", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("team_id", name=op.f("pk_chart_refusals")),
    )


def downgrade() -> None:
    op.drop_table("chart_refusals")
