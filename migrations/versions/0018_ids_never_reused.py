"""ids never reused: `budgets` and `metric_rules` get SQLite's AUTOINCREMENT

A budget's warnings are deduplicated by its id and a rule's state rows rest on
its id. Without AUTOINCREMENT SQLite gives the highest id again once its row is
deleted, so a budget set after one was removed could find its warnings already
"told". PostgreSQL's sequences never go back: nothing to do there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 17:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("budgets", "metric_rules")


def _recreate(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(
            table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
        ):
            pass


def upgrade() -> None:
    _recreate(True)


def downgrade() -> None:
    _recreate(False)
