"""The container image and compose files, checked without a Docker engine: a
multi-stage, non-root image whose data (and working directory) is the /data volume,
so `docker run --env-file .env` works with a copied .env.example; and what the bot
says when its SQLite file cannot be used (exit code 4).
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeSlack, FakeTogether
from tests.support import REPO, BotProcess


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_non_root_with_healthcheck_and_exec_cmd() -> None:
    instructions = _dockerfile_instructions()
    froms = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a builder and a runtime stage"
    final = instructions[froms[-1] :]
    assert any(w == "COPY" and a.startswith("--from=") for w, a in final), "copies from builder"

    users = [a for w, a in final if w == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")

    [healthcheck] = [a for w, a in final if w == "HEALTHCHECK"]
    assert "/healthz" in healthcheck and "CMD" in healthcheck

    cmd = [a for w, a in final if w == "CMD"][-1]
    assert json.loads(cmd) == [
        "rl-bot",
        "serve",
    ]  # exec form: rl-bot is PID 1's child, gets signals
    assert any(w == "EXPOSE" and "3000" in a.split() for w, a in final)

    # matplotlib's font list is built into the image, where the non-root user may
    # read and update it: the first chart does not rebuild it in every container.
    [config_dir] = [
        a.split("=", 1)[1].split()[0]
        for w, a in final
        if w == "ENV" and a.startswith("MPLCONFIGDIR=")
    ]
    built = [a for w, a in final if w == "RUN" and "matplotlib.font_manager" in a]
    assert built and f"chown -R {user}:" in built[0] and config_dir in built[0]


def _yaml(name: str) -> Any:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((REPO / name).read_text())


@pytest.mark.slow  # runs `docker compose` where it exists
def test_compose_runs_bot_with_postgres_and_a_one_shot_migrate(tmp_path: Path) -> None:
    compose = _yaml("docker-compose.yml")
    services = compose["services"]
    assert {"bot", "postgres", "migrate"} <= services.keys()
    bot, migrate, postgres = services["bot"], services["migrate"], services["postgres"]

    assert bot["command"] == ["rl-bot", "serve"]
    assert migrate["command"] == ["rl-bot", "migrate"]
    for service in (bot, migrate):
        url = service["environment"]["DATABASE_URL"]
        assert url.startswith("postgresql://") and "@postgres:5432/" in url
    assert any(str(p).endswith(":3000") for p in bot["ports"])
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert bot["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert postgres["healthcheck"]["test"]
    # The bot's health check is the image's HEALTHCHECK on /healthz; compose must not turn it off.
    assert not (bot.get("healthcheck") or {}).get("disable", False)

    docker = shutil.which("docker")
    has_compose = (
        docker is not None
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    )
    if has_compose:  # where the compose CLI exists: let compose itself validate the file
        assert docker is not None
        work = tmp_path / "compose"
        work.mkdir()
        shutil.copy(REPO / "docker-compose.yml", work)
        (work / ".env").write_text("")
        checked = subprocess.run(
            [docker, "compose", "config", "--quiet"], cwd=work, capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr


def _final_stage() -> list[tuple[str, str]]:
    instructions = _dockerfile_instructions()
    last = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last:]


def _example_database_url() -> str:
    [url] = re.findall(r"^DATABASE_URL=(.*)$", (REPO / ".env.example").read_text(), re.MULTILINE)
    return url.strip()


def test_the_image_keeps_its_data_in_the_data_volume_where_env_example_points() -> None:
    final = _final_stage()
    volumes = [v for w, a in final if w == "VOLUME" for v in json.loads(a)]
    assert volumes == ["/data"]
    workdir = [a for w, a in final if w == "WORKDIR"][-1]
    assert workdir == "/data"
    user = [a for w, a in final if w == "USER"][-1].split(":")[0]
    assert any(w == "RUN" and f"chown {user}:" in a and "/data" in a for w, a in final)
    [default] = [
        a.split("DATABASE_URL=", 1)[1].split()[0]
        for w, a in final
        if w == "ENV" and "DATABASE_URL=" in a
    ]
    assert default == "sqlite:////data/rl-bot.db"

    # `docker run --env-file` with a copied .env.example: its SQLite file, read
    # against the working directory, is in the volume the user may write.
    url = _example_database_url()
    assert url.startswith("sqlite:///")
    where = posixpath.normpath(posixpath.join(workdir, url.removeprefix("sqlite:///")))
    assert posixpath.dirname(where) == "/data", where
    # Nothing of the image is read from beside the package (the scripts ship in it).
    assert not any(w == "COPY" and "migrations" in a for w, a in final)
    assert not any(w == "ENV" and "RLBOT_ALEMBIC_INI" in a for w, a in final)


def test_compose_gives_the_bot_the_data_volume() -> None:
    compose = _yaml("docker-compose.yml")
    for name in ("bot", "migrate"):
        assert "rlbot-data:/data" in compose["services"][name]["volumes"], name
    assert "rlbot-data" in compose["volumes"]


@pytest.mark.slow  # runs rl-bot as a process
def test_env_example_database_url_works_in_the_working_directory(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    """Locally, as in the image (whose working directory is /data): the file lands there."""
    bot = BotProcess.start(
        workdir=tmp_path, db_url=_example_database_url(), slack=slack, together=together
    )
    bot.stop()
    assert (tmp_path / "rl-bot.db").is_file()


@pytest.mark.slow  # runs rl-bot as a process
def test_an_unusable_sqlite_file_exits_4_saying_which_file_and_why(
    tmp_path: Path, slack: FakeSlack, together: FakeTogether
) -> None:
    database = tmp_path / "missing" / "rl-bot.db"
    bot = BotProcess.start(
        workdir=tmp_path,
        db_url=f"sqlite:///{database}",
        slack=slack,
        together=together,
        wait=False,
    )
    assert bot.proc.wait(timeout=30) == 4, bot.log_tail()
    [line] = [line for line in bot.log().splitlines() if line.strip()]
    assert line.startswith(f"rl-bot: cannot use the SQLite database {database} (DATABASE_URL)")
    assert "No such file or directory" in line and f"{database.parent} must exist" in line
