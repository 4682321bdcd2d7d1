"""How a setting is declared: a default, a plain-words description and a tier.

"user" is what a deployment sets (secrets, the database, on-call, allowlists,
feature switches), "tuning" has defaults that suit most teams, and "test-only"
exists for the tests' fake servers, crash injection and shortened windows.
`docs/configuration.md` and `.env.example` are written from these, so every
settings class declares its fields through them.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

Tier = Literal["user", "tuning", "test-only"]
TIERS: tuple[Tier, ...] = get_args(Tier)


def setting(tier: Tier, default: Any, description: str, **constraints: Any) -> Any:
    """A settings field with its description and its tier (read back by `tier_of`)."""
    extra: JsonDict = {"tier": tier}
    return Field(default, description=description, json_schema_extra=extra, **constraints)


def user(default: Any, description: str, **constraints: Any) -> Any:
    return setting("user", default, description, **constraints)


def tuning(default: Any, description: str, **constraints: Any) -> Any:
    return setting("tuning", default, description, **constraints)


def test_only(default: Any, description: str, **constraints: Any) -> Any:
    return setting("test-only", default, description, **constraints)


def tier_of(field: FieldInfo) -> Tier:
    """The tier a setting was declared with; every field of `Settings` has one."""
    extra = field.json_schema_extra
    declared = extra.get("tier") if isinstance(extra, dict) else None
    for tier in TIERS:
        if declared == tier:
            return tier
    raise ValueError(f"a setting has no tier: {field!r}")
