"""A JSON column that Python sees as a pydantic model.

`PydanticJSON(Model, missing=...)` is a plain `JSON` column in the database (the
migrations, and `alembic check`, see no change), written with
`model_dump(mode="json")` and read back with `Model.model_validate`. A reader
gets the model and uses its attributes: no stored dict is read with `.get()`.

Reading never raises. What the column holds was written by every version of the
bot, and by hand at times; one row that no longer reads must not stop the poll
loop or a command. So NULL and a value that fails validation both read as
`missing()`: for the watch's progress and the W&B view that is the empty model
(a first look, nothing read yet: what the old readers made of them); for a
snapshot it is None (no session to tell, the message falls back to the row's
id). No separate "all fields optional" copy of each model is kept for the
fallback: the models are already tolerant of Together's shapes (unknown fields
kept, a field of the wrong type dropped to its default, see
`bot.training.tolerant`), so the only values that still fail are ones that
name nothing (a snapshot without an id, a list where an object was stored).
A value that fails is logged once per read, with the model's name.

Writing takes the model, or a dict, written as it is: it is already the
column's JSON. The poll writes each judged session's snapshot as the dict
`trimmed_snapshot` builds (the model reads it back): validating it only to dump
it again would triple what a snapshot costs a poll cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


class PydanticJSON(TypeDecorator[Any], Generic[M, R]):
    """A JSON column read as `model` (see the module's docstring); NULL and an
    unreadable value read as `missing()`."""

    impl = JSON
    cache_ok = True

    def __init__(self, model: type[M], *, missing: Callable[[], R]) -> None:
        super().__init__()
        self.model = model
        self.missing = missing

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> M | R:
        if value is None:
            return self.missing()
        try:
            return self.model.model_validate(value)
        except ValidationError as exc:
            log.warning(
                "a stored %s did not read: %s",
                self.model.__name__,
                exc.errors()[0]["msg"] if exc.errors() else exc,
            )
            return self.missing()
