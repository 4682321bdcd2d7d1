"""How Together's fields are read: tolerant of odd values, exact with int64s.

int64 fields (steps, versions) arrive as strings and are parsed as exact
integers; times that are empty or unreadable are None. Unknown fields are kept
(`extra="allow"`), and a field of an unexpected type falls back to its default,
so one odd value never makes a whole session unreadable.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)


def _lenient_datetime(value: Any) -> Any:
    if value in ("", None):
        return None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return value


#: A time as Together sends it; empty or unreadable is None.
LenientDatetime = Annotated[datetime | None, BeforeValidator(_lenient_datetime)]


class TolerantModel(BaseModel):
    """The base of every model of Together's answers: frozen, keeping unknown
    fields, and dropping a field of the wrong type rather than the object."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _tolerant(cls, value: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """A field of an unexpected type (a number for a name, a string for the
        rank) is dropped to its default rather than making the whole session
        unreadable; only a required field (the id) still refuses.

        Validated whole first, and only on failure again without the fields that
        failed: one call per object, not one per field (a list page is thousands
        of fields)."""
        try:
            return handler(value)
        except ValidationError as exc:
            if not isinstance(value, dict):
                raise
            fields = cls.model_fields
            failed = {e["loc"][0] for e in exc.errors() if e["loc"]}
            optional = {n for n in failed if n in fields and not fields[n].is_required()}
            if not optional:
                raise
            return handler({k: v for k, v in value.items() if k not in optional})


_INT_RE = re.compile(r"[+-]?\d{1,30}")


def lenient_int(value: Any) -> Any:
    """An int64 as Together sends it (a JSON string, or a number) -> an exact int.

    Never through `float`: `"12345678901234567"` must not become `…568`. A
    fractional value is cut toward zero; anything else unreadable is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        text = value.strip()
        if _INT_RE.fullmatch(text):
            return int(text)
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None
        # The exponent bound keeps "1e999999999" from building a huge int.
        if not number.is_finite() or number.adjusted() > 30:
            return None
        return int(number)
    return None


#: An int64 as Together sends it (see `lenient_int`).
LenientInt = Annotated[int | None, BeforeValidator(lenient_int)]
