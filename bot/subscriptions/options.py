"""A thread's options: what `subscribe <id> …` or a follow rule asks of a
subscription's thread, and what `list` shows a thread was given.

One model travels from the parser to the rows it is written to, so a new option
is added in one place. A field left None was not given: a request keeps the
thread's (and a new thread the bot's default); read back from a thread, None is
the bot's default. It is checked where a person gives it (the parser); a row
is read back as it was stored. Pure.
"""

from __future__ import annotations

from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.store.queries.routing import DM_CREATOR
from bot.store.tables import FollowRule, Subscription

FILTERS = ("status", "checkpoints", "errors-only")
DEFAULT_FILTERS = frozenset({"status"})
BROADCASTS = ("errors", "ends", "all", "off")
DMS = (DM_CREATOR,)
MAX_TARGET = 10**12
#: the longest `stall=` a thread takes: 30 days, as any duration a command takes
MAX_STALL_MINUTES = 30 * 24 * 60

Broadcast = Literal["errors", "ends", "all", "off"]
Dm = Literal["creator", ""]


class ThreadOptions(BaseModel):
    """What one thread is asked to do beyond the card: which changes it is told
    (`filters`), when a standing step is a stall (`stall_after_minutes`, 0 off),
    the step the card's ETA aims at (`target_step`), which replies also show in
    the channel (`broadcast`), whether the creator is DMed (`dm`: "creator", or
    "" to stop), and whether a final chart is drawn (`chart_on_end`). The bot's
    defaults are the `status` filter, STALL_AFTER_MINUTES, no target,
    BROADCAST_ERRORS, no DM and a final chart."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    filters: frozenset[str] | None = None
    stall_after_minutes: int | None = Field(default=None, ge=0, le=MAX_STALL_MINUTES)
    target_step: int | None = Field(default=None, ge=1, le=MAX_TARGET)
    broadcast: Broadcast | None = None
    dm: Dm | None = None
    chart_on_end: bool | None = None

    @field_validator("filters")
    @classmethod
    def _known_filters(cls, filters: frozenset[str] | None) -> frozenset[str] | None:
        if filters is None:
            return None
        unknown = sorted(filters - set(FILTERS))
        if unknown:
            raise ValueError(f"unknown filters {unknown}; filters are {FILTERS}")
        if {"status", "errors-only"} <= filters:
            raise ValueError("`status` tells every change, `errors-only` only errors: not both")
        return filters

    @classmethod
    def of_thread(cls, sub: Subscription) -> ThreadOptions:
        """The options a stored thread has (a thread always has a final chart or not)."""
        return cls.model_construct(
            filters=sub.filter_set,
            stall_after_minutes=sub.stall_after_minutes,
            target_step=sub.target_step,
            broadcast=cast(Broadcast | None, sub.broadcast),
            dm=cast(Dm | None, sub.dm),
            chart_on_end=bool(sub.chart_on_end),
        )

    @classmethod
    def of_rule(cls, rule: FollowRule) -> ThreadOptions:
        """What a follow rule gives each thread it makes: its filters and stall."""
        return cls.model_construct(
            filters=rule.filter_set, stall_after_minutes=rule.stall_after_minutes
        )

    @property
    def chosen_filters(self) -> frozenset[str]:
        """The filters given, or the bot's default."""
        return DEFAULT_FILTERS if self.filters is None else self.filters

    @property
    def sets_thread(self) -> bool:
        """Whether anything beyond the filters was given: written with the
        subscription, and what makes subscribing again an answer of its own."""
        return any(
            v is not None
            for v in (
                self.stall_after_minutes,
                self.target_step,
                self.broadcast,
                self.dm,
                self.chart_on_end,
            )
        )

    def words(self) -> tuple[str, ...]:
        """The options written as `subscribe` takes them, so a person can see why a
        thread behaves as it does and repeat it elsewhere. An option at the bot's
        default is not shown."""
        words = []
        if self.stall_after_minutes is not None:
            minutes = self.stall_after_minutes
            words.append("stall=off" if minutes == 0 else f"stall={minutes}m")
        if self.target_step is not None:
            words.append(f"target={self.target_step}")
        if self.broadcast:
            words.append(f"broadcast={self.broadcast}")
        if self.dm:
            words.append(f"dm={self.dm}")
        if self.chart_on_end is False:
            words.append("chart=off")
        return tuple(words)


#: nothing given: a subscription keeps its filters and its thread's options
KEEP_THREAD = ThreadOptions()


def filters_text(filters: frozenset[str]) -> str:
    """Filters as a row stores them."""
    return ",".join(sorted(filters)) or "status"
