"""Talking to the Together-shaped server as Together's SDK would read it:
strict validation of an answer's JSON bytes against the SDK's own models, with
no key the SDK does not declare (its models allow unknown keys, so drift into a
misspelt or invented key would pass unnoticed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict

from bot.simulated import FakeTogether

KEY = "test-together-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Keys the fake may send that the SDK's Session does not declare: the session
# type (trainer only / trainer and generator), which the bot shows when present.
ALLOWED_EXTRAS = {"Session": {"type"}}

M = TypeVar("M", bound=BaseModel)


class ErrorDetail(BaseModel):
    """The documented error object; the SDK has no model for it (it keeps the
    decoded body on its exceptions), so this one is exact: four keys, no more."""

    model_config = ConfigDict(extra="forbid", strict=True)
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: ErrorDetail


def _children(model: BaseModel) -> Iterator[BaseModel]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                yield item


def extras(model: BaseModel, where: str = "") -> list[str]:
    """Keys present in the JSON that no SDK model along the way declares."""
    name = type(model).__name__
    found = [
        f"{where or name}.{key}"
        for key in (model.__pydantic_extra__ or {})
        if key not in ALLOWED_EXTRAS.get(name, set())
    ]
    for child in _children(model):
        found += extras(child, f"{where or name}>{type(child).__name__}")
    return found


class FieldCoverage:
    """Which declared fields of each SDK model the fake has actually sent."""

    def __init__(self) -> None:
        self.seen: dict[type[BaseModel], set[str]] = defaultdict(set)

    def add(self, model: BaseModel) -> None:
        self.seen[type(model)] |= model.model_fields_set
        for child in _children(model):
            self.add(child)

    def missing(self, cls: type[BaseModel]) -> set[str]:
        return set(cls.model_fields) - self.seen[cls]


def fetch(fake: FakeTogether, path: str, *, method: str = "GET", **kw: Any) -> httpx.Response:
    return httpx.request(method, f"{fake.base_url}{path}", headers=AUTH, timeout=5, **kw)


def strict(cls: type[M], response: httpx.Response, coverage: FieldCoverage | None = None) -> M:
    """The answer as the SDK model, strictly, with no undeclared keys."""
    assert response.headers["content-type"].startswith("application/json")
    model = cls.model_validate_json(response.content, strict=True)
    assert extras(model) == [], response.text[:500]
    if coverage is not None:
        coverage.add(model)
    return model
