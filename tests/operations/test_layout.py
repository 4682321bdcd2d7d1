"""The tree shows the design: modules of one concern (400 lines at most), and
`bot/` holds only its entry modules beside the packages."""

from __future__ import annotations

from pathlib import Path

BOT = Path(__file__).resolve().parents[2] / "bot"
#: the only modules directly under bot/: the rest are packages
ENTRY_MODULES = {"__init__.py", "__main__.py", "cli.py", "runtime.py"}


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(BOT)): n
        for p in BOT.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert long == {}


def test_bot_holds_its_entry_modules_and_packages_only() -> None:
    loose = {p.name for p in BOT.glob("*.py")} - ENTRY_MODULES
    assert loose == set()
