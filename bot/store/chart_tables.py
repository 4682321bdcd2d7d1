"""The tables of the charts: the steps the polls saw (what a progress chart draws),
the last W&B read of each watched session (its card's metrics line and live chart),
and the workspaces that refused the card's chart block."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from bot.store.tables import Base, BigId
from bot.store.typed_json import PydanticJSON
from bot.training.metrics_view import MetricsView


class ProgressPoint(Base):
    """The step one poll saw of a watched session, written only when it moved: what
    a progress chart draws. Bounded per session (`bot.store.queries.progress_points`
    thins it past a thousand points) and deleted with the session's watch."""

    __tablename__ = "progress_points"
    __table_args__ = (Index("ix_progress_points_session_seen", "session_id", "seen_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(128))
    seen_at: Mapped[datetime] = mapped_column(DateTime())
    step: Mapped[int] = mapped_column(BigInteger())


class SessionMetrics(Base):
    """What the bot last read of a watched session's W&B run for its card: the
    latest values and recent points (`bot.training.metrics_view.MetricsView` as JSON),
    when, and which metrics were already told to have gone NaN or infinite."""

    __tablename__ = "session_metrics"

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    read_at: Mapped[datetime | None] = mapped_column(DateTime(), nullable=True)
    # NULL (nothing read yet) reads as the empty view.
    view: Mapped[MetricsView] = mapped_column(
        PydanticJSON(MetricsView, missing=MetricsView), nullable=True
    )


class ChartRefusal(Base):
    """A Slack workspace that refused the root card's chart block
    (`invalid_blocks`): its cards are drawn without the chart from then on, on
    every replica and after a restart, so no redraw is refused for it again."""

    __tablename__ = "chart_refusals"

    team_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    refused_at: Mapped[datetime] = mapped_column(DateTime())
    error: Mapped[str] = mapped_column(String(64))
