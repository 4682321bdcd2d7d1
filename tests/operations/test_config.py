"""Settings, their documentation and `.env.example` agree, and a copied
`.env.example` is refused with every secret it leaves unset named.

Pure: no bot process and no database.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot import cli
from bot.settings.doc import COMMAND, markdown
from bot.settings.model import Settings, is_placeholder
from bot.settings.tiers import tier_of
from bot.settings.timings import Timings

REPO = Path(__file__).resolve().parents[2]
SECRETS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "TOGETHER_API_KEY")


def _example_names() -> list[str]:
    """Every name `.env.example` sets, or shows commented out as an example."""
    text = (REPO / ".env.example").read_text()
    return re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE)


def test_every_setting_has_a_description_and_a_tier() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description and field.description.strip(), name
        tier_of(field)  # raises when the field was declared without one


def test_configuration_page_is_what_the_generator_writes() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    assert page == markdown(), f"docs/configuration.md is out of date: run `{COMMAND}`"
    for name in Settings.model_fields:
        assert f"| `{name.upper()}` |" in page, name


def test_env_example_names_only_user_settings_and_all_of_them() -> None:
    fields = Settings.model_fields
    names = _example_names()
    unknown = [n for n in names if n.lower() not in fields]
    assert not unknown, f".env.example names settings that do not exist: {unknown}"
    not_user = [n for n in names if tier_of(fields[n.lower()]) != "user"]
    assert not not_user, f".env.example names settings outside the user tier: {not_user}"
    users = {name.upper() for name, field in fields.items() if tier_of(field) == "user"}
    assert users == set(names), f"user settings missing from .env.example: {users - set(names)}"
    assert len(names) == len(set(names))


def test_env_example_is_short_with_one_comment_line_at_most_per_setting() -> None:
    header, *lines = (REPO / ".env.example").read_text().splitlines()
    assert header.startswith("#") and len(lines) < 30
    comments = 0
    for line in lines:
        if line.startswith("#"):
            comments += 1
            assert comments <= 1, f"more than one comment line before {line!r}"
        else:
            comments = 0


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
        monkeypatch.delenv(name, raising=False)


def test_a_copied_env_example_names_all_three_secrets_as_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start's first command on an unedited `.env`: one line for each
    secret still to fill in, and nothing started."""
    _clean_environment(monkeypatch)
    shutil.copy(REPO / ".env.example", tmp_path / ".env")
    monkeypatch.chdir(tmp_path)

    with pytest.raises(SystemExit) as stopped:
        cli.main(["serve"])

    assert stopped.value.code == cli.EXIT_CONFIG
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(SECRETS), lines
    for name, line in zip(SECRETS, lines, strict=True):
        assert line.startswith(f"rl-bot: {name} ") and "placeholder" in line, line
    assert not (tmp_path / "rl-bot.db").exists()


def test_a_placeholder_is_refused_only_where_the_secret_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clean_environment(monkeypatch)
    settings = Settings(
        _env_file=None,
        slack_bot_token="xoxb-real-looking-0123",
        slack_signing_secret="<your signing secret>",
        slack_app_token="xapp-…",
        together_api_key="together-key-0123",
    )
    serve = settings.problems_for("serve")
    assert serve == [
        "SLACK_SIGNING_SECRET is still .env.example's placeholder: " + "put the real value in .env"
    ]
    assert [p.split()[0] for p in settings.problems_for("socket")] == ["SLACK_APP_TOKEN"]
    assert settings.problems_for("show") == []
    assert settings.problems_for("migrate") == []
    # a placeholder is not a secret: log redaction never hunts for "<your signing secret>"
    assert settings.secrets() == ["xoxb-real-looking-0123", "together-key-0123"]


@pytest.mark.parametrize("value", ["xoxb-...", "...", "xapp-…", "<token>", " xoxb- ", "xapp-"])
def test_placeholders(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize(
    "value",
    [
        "xoxb-test-bot-token-0123456789",
        "xoxb-1-socket-bottokensecret",
        "test-signing-secret-0123456789",
        "8f14e45fceea167a5a36dedd4bea2543",
        "xapp-1-A111-222-appleveltokensecret",
    ],
)
def test_real_looking_secrets_are_not_placeholders(value: str) -> None:
    assert not is_placeholder(value)


def test_the_timing_table_in_the_architecture_doc_is_what_timings_computes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/architecture.md's "Leases, ticks and windows" table is `Timings` in
    words: its default column must be what `Timings.of` gives the defaults."""
    _clean_environment(monkeypatch)
    timings = Timings.of(Settings(_env_file=None))
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    section = doc.split("## Leases, ticks and windows", 1)[1].split("\n## ", 1)[0]
    defaults = {
        row[0]: row[2]
        for line in section.splitlines()
        if line.startswith("| ") and (row := [c.strip() for c in line.strip("|").split("|")])
    }
    by_row = {
        "lease": timings.lease,
        "renewal": timings.renew_every,
        "heartbeat": timings.heartbeat_every,
        "holder gone": timings.silent_after,
        "unrenewed": timings.unrenewed_after,
        "poll tick": timings.poll_tick,
        "delivery": timings.delivery_every,
    }
    for row, seconds in by_row.items():
        assert defaults[row] == f"{seconds:g} s", f"architecture.md's '{row}' row"
    assert timings.report_stale >= 2 * timings.lease
