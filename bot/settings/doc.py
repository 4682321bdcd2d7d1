"""`docs/configuration.md`, written from `Settings` so that it cannot drift.

Every setting is listed under its tier with its environment name, type, default
and description, all read from the field itself. Rewrite the page after
changing a setting:

    python -m bot.settings.doc > docs/configuration.md

`tests/operations/test_config.py` fails while the page differs from what this writes.
"""

from __future__ import annotations

import sys
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from bot.settings.model import Settings
from bot.settings.tiers import TIERS, Tier, tier_of

COMMAND = "python -m bot.settings.doc > docs/configuration.md"

INTRO = f"""# Configuration

<!-- Written by `{COMMAND}` from `Settings` in bot/settings/model.py; edit those, not this page. -->

rl-bot reads every setting from the environment or from `.env` in its working
directory (names are case-insensitive; a real environment variable wins over
`.env`). `.env.example` holds the settings a deployment sets; copy it to `.env`
and fill in the secrets. A missing or wrong setting stops start-up with one line
each on stderr and exit code 2: a missing token, one still holding
`.env.example`'s placeholder, an `xapp-` token where `xoxb-` belongs, a missing
signing secret in HTTP mode, an unusable `DATABASE_URL`. Which secrets are needed
depends on the command: `rl-bot serve` needs `SLACK_BOT_TOKEN`,
`SLACK_SIGNING_SECRET` and `TOGETHER_API_KEY`; `rl-bot socket` needs
`SLACK_APP_TOKEN` instead of the signing secret; `rl-bot show` only
`TOGETHER_API_KEY`; `rl-bot migrate` none.
"""

HEADINGS: dict[Tier, str] = {
    "user": "## Settings you set\n\n"
    "Secrets, the database, on-call, allowlists and feature switches: the settings "
    "in `.env.example`.",
    "tuning": "## Tuning\n\n"
    "Defaults that suit most teams. [operations.md](operations.md), "
    "[alerts.md](alerts.md) and [performance.md](performance.md) say when to change one.",
    "test-only": "## Test-only\n\n"
    "For the tests' fake servers, crash injection and shortened windows; a deployment "
    "leaves them alone.",
}


def markdown() -> str:
    """The whole page, every setting of `Settings` under its tier."""
    fields = Settings.model_fields
    parts = [INTRO]
    for tier in TIERS:
        rows = [
            "| setting | type | default | what it does |",
            "|---|---|---|---|",
            *(_row(name, field) for name, field in fields.items() if tier_of(field) == tier),
        ]
        parts.append(HEADINGS[tier] + "\n\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


def _row(name: str, field: FieldInfo) -> str:
    cells = [f"`{name.upper()}`", _type(field), _default(field), field.description or ""]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _type(field: FieldInfo) -> str:
    words = _type_words(field.annotation)
    bounds = [
        f"{sign} {_number(getattr(item, attr))}"
        for item in field.metadata
        for kind, sign, attr in ((Gt, ">", "gt"), (Ge, "≥", "ge"), (Lt, "<", "lt"), (Le, "≤", "le"))
        if isinstance(item, kind)
    ]
    return f"{words}, {' and '.join(bounds)}" if bounds else words


def _type_words(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        [inner] = [arg for arg in get_args(annotation) if arg is not NoneType]
        return _type_words(inner)
    if origin is Literal:
        choices = [f"`{choice}`" for choice in get_args(annotation)]
        return ", ".join(choices[:-1]) + " or " + choices[-1]
    if origin is frozenset:
        return "comma-separated ids"
    if origin is dict:
        return "comma-separated `key=value` pairs"
    if origin is tuple:
        return "comma-separated names"
    simple: dict[Any, str] = {
        SecretStr: "secret",
        str: "text",
        bool: "`true` or `false`",
        int: "whole number",
        float: "number",
    }
    return simple[annotation]


def _default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    value = (
        extra.get("default") if isinstance(extra, dict) and "default" in extra else field.default
    )
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, frozenset | dict) and not value:
        return "empty"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    if isinstance(value, tuple):
        return f"`{','.join(map(str, value))}`"
    return f"`{value}`"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


if __name__ == "__main__":
    sys.stdout.write(markdown())
