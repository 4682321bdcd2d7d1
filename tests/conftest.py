"""Shared fixtures: a fresh database per test on each backend, the local
Slack- and Together-shaped servers, and a real `rl-bot serve` process."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import settings
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.simulated import FakeSlack, FakeTogether
from bot.store.engine import make_engine, make_sessionmaker
from tests import forked_bot
from tests.support import BotFactory, BotProcess, pg_admin, postgres_available

PG_BASE = os.environ.get("RLBOT_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


# Fixtures that start a real `rl-bot` process: tests using them are `slow`, so
# `pytest -m "not slow"` is the quick loop over pure rules and fakes.
PROCESS_FIXTURES = frozenset(
    {"launch_bot", "start_bot", "bot", "rig", "start_socket_bot", "socket_bot"}
)


BACKENDS = frozenset({"sqlite", "postgresql"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark process tests `slow`; run a `backend_independent` test on the first
    backend only (its bot's behaviour does not depend on the database: a second
    run would only cost a bot's time on a shared machine)."""
    first = _backends()[0] if _backends() else None
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        backend = next((p for p in params if isinstance(p, str) and p in BACKENDS), None)
        marker = item.get_closest_marker("backend_independent")
        if marker is not None and not marker.args:
            raise pytest.UsageError(f"{item.nodeid}: say why it is backend_independent")
        if marker is not None and backend is not None and backend != first:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    items[:] = spread_long(items)


def spread_long(items: list[pytest.Item]) -> list[pytest.Item]:
    """The `long` tests spread evenly through the collection, the rest in order.

    xdist's worksteal hands each worker a contiguous run of the collection and
    steals from the end of a worker's queue: long tests collected side by side
    (the bench smoke groups) ran one after another on one worker, last, while
    the other workers had nothing left to do. Spread out, each worker's run
    holds a few of them."""
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if not long:
        return items
    out = [item for item in items if item.get_closest_marker("long") is None]
    every = len(items) / len(long)
    for j in reversed(range(len(long))):
        out.insert(min(len(out), int(j * every)), long[j])
    return out


def pytest_configure(config: pytest.Config) -> None:
    """The quick loop (`-m "not slow"`) runs property tests with a quarter of the examples
    (hypothesis profile `quick`); the whole suite runs them all. Test modules ask
    `tests.support.examples(n)` for their counts, so they scale with the profile."""
    settings.register_profile("quick", max_examples=25)
    if config.getoption("markexpr") == "not slow" and not config.getoption(
        "hypothesis_profile", None
    ):
        settings.load_profile("quick")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker per core for the quick loop, whose
    tests keep a core busy and where each extra worker costs a whole collection;
    four per core when processes are started, since those tests mostly wait on
    the bot (on 2 cores the whole suite used about 60% of the CPU with six
    workers; eight took 329 s where six took 352-362 s).
    `PYTEST_XDIST_AUTO_NUM_WORKERS` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0))
    return cores if config.getoption("markexpr") == "not slow" else 4 * cores


def _refuse_to_spawn(*args: object, **kwargs: object) -> NoReturn:
    raise AssertionError(
        "this test starts a process but is not marked slow: mark it "
        "`@pytest.mark.slow` (or its module `pytestmark = pytest.mark.slow`)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """A test not marked `slow` may not start a process, so that the quick loop
    (`-m "not slow"`) stays quick: its fixtures and body run with process
    creation refused, and a test that forgot its marker fails saying so."""
    if item.get_closest_marker("slow") is not None:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", _refuse_to_spawn)
        patch.setattr(os, "fork", _refuse_to_spawn)
        patch.setattr(os, "posix_spawn", _refuse_to_spawn)
        patch.setattr(forked_bot, "launch", _refuse_to_spawn)
        return (yield)


def _backends() -> list[str]:
    wanted = os.environ.get("RLBOT_TEST_BACKENDS", "sqlite,postgresql").split(",")
    return [b.strip() for b in wanted if b.strip()]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file per worker; each test copies it (a migration per
    test costs Alembic's start-up and a second of the disk's syncs)."""
    from bot.store.migrations import upgrade

    path = tmp_path_factory.mktemp("template") / "rl-bot.db"
    upgrade(f"sqlite:///{path}")
    leftovers = [p.name for p in path.parent.iterdir() if p != path]
    assert not leftovers, f"the template is not one closed file: {leftovers}"
    return path


class DatabaseDropper:
    """Drops used PostgreSQL test databases on one background thread.

    DROP DATABASE forces a checkpoint, seconds on a busy disk; no test needs to
    wait for it, so a test's teardown only hands the name over."""

    def __init__(self) -> None:
        self._names: queue.Queue[str | None] = queue.Queue()
        self._errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="drop-databases", daemon=True)
        self._thread.start()

    def drop(self, name: str) -> None:
        self._names.put(name)

    def _run(self) -> None:
        while (name := self._names.get()) is not None:
            try:
                pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except Exception as exc:  # reported when the session ends
                self._errors.append(f"{name}: {exc!r}")

    def close(self) -> None:
        self._names.put(None)
        self._thread.join()
        assert not self._errors, f"test databases not dropped: {self._errors}"


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """One migrated template database; each test copies it (fast)."""
    if not postgres_available(PG_BASE):
        if os.environ.get("RLBOT_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable at {PG_BASE}")
        pytest.skip("PostgreSQL not reachable")
    name = f"rlbot_tmpl_{os.getpid()}"
    pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
    from bot.store.migrations import upgrade

    upgrade(f"{PG_BASE}/{name}")
    yield name
    pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_dropper(pg_template: str) -> Iterator[DatabaseDropper]:
    dropper = DatabaseDropper()
    yield dropper
    dropper.close()


class DatabaseStock:
    """Copies of the template made ahead on a background thread.

    CREATE DATABASE takes a few hundred milliseconds; made while the previous
    test runs, a test's setup only takes the next name."""

    AHEAD = 2

    def __init__(self, template: str) -> None:
        self._template = template
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=self.AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="make-databases", daemon=True)
        self._thread.start()

    def take(self) -> str:
        item = self._ready.get(timeout=120)
        if isinstance(item, BaseException):
            raise item
        return item

    def _run(self) -> None:
        while not self._stop.is_set():
            name = f"rlbot_t_{uuid.uuid4().hex[:12]}"
            item: str | BaseException = name
            try:
                pg_admin(PG_BASE, f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
            except Exception as exc:  # handed to the test that takes it
                item = exc
            while not self._stop.is_set():
                try:
                    self._ready.put(item, timeout=0.2)
                    break
                except queue.Full:
                    continue
            else:
                if isinstance(item, str):
                    pg_admin(PG_BASE, f'DROP DATABASE IF EXISTS "{name}"')

    def close(self) -> list[str]:
        """Stop; the names made and never taken."""
        self._stop.set()
        self._thread.join()
        left = []
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, str):
                left.append(item)
        return left


@pytest.fixture(scope="session")
def pg_stock(pg_template: str, pg_dropper: DatabaseDropper) -> Iterator[DatabaseStock]:
    stock = DatabaseStock(pg_template)
    yield stock
    for name in stock.close():
        pg_dropper.drop(name)


@contextlib.contextmanager
def fresh_database(request: pytest.FixtureRequest, backend: str) -> Iterator[str]:
    """A migrated, empty database on `backend`, for a test or a module: a copy of
    the session's template (on PostgreSQL, made ahead by `DatabaseStock`)."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        tmp_path_factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
        path = tmp_path_factory.mktemp("db") / "rl-bot.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    stock: DatabaseStock = request.getfixturevalue("pg_stock")
    dropper: DatabaseDropper = request.getfixturevalue("pg_dropper")
    name = stock.take()
    try:
        yield f"{PG_BASE}/{name}"
    finally:
        dropper.drop(name)


@pytest.fixture(params=_backends())
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database on the backend under test."""
    with fresh_database(request, request.param) as url:
        yield url


@pytest.fixture
async def maker(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """A session maker on `db_url`, for tests that call the store or a job in-process."""
    engine = make_engine(db_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def together() -> Iterator[FakeTogether]:
    with FakeTogether() as fake:
        yield fake


class StoppingBots:
    """Waits for bots that were asked to stop, on one background thread.

    A graceful shutdown takes a bot 0.15-0.3 s (uvicorn's 0.1 s tick, the ticks it
    lets finish, its leases handed back); nothing of a test reads its bots once
    they are asked to stop, so the next test does not wait for that. A bot that
    does not stop within 15 s is killed, as a test's own teardown did."""

    def __init__(self) -> None:
        self._bots: queue.Queue[BotProcess | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="stop-bots", daemon=True)
        self._thread.start()

    def hand_over(self, bot: BotProcess) -> None:
        self._bots.put(bot)

    def _run(self) -> None:
        while (bot := self._bots.get()) is not None:
            bot.stop()

    def close(self) -> None:
        self._bots.put(None)
        self._thread.join()


@pytest.fixture(scope="session")
def stopping_bots() -> Iterator[StoppingBots]:
    stopping = StoppingBots()
    yield stopping
    stopping.close()


#: `launch_bot(workdir_name, **BotProcess.start options)`: a process on this test's database and fakes
BotLauncher = Callable[..., BotProcess]


@pytest.fixture
def launch_bot(
    db_url: str,
    slack: FakeSlack,
    together: FakeTogether,
    tmp_path_factory: pytest.TempPathFactory,
    stopping_bots: StoppingBots,
) -> Iterator[BotLauncher]:
    """Start `rl-bot` processes against this test's database and fakes; all stopped at the end.

    For processes the test expects to die or refuse (`wait=False`) or to run another command;
    `start_bot` is the common case."""
    started: list[BotProcess] = []

    def launch(workdir_name: str = "bot", **options: Any) -> BotProcess:
        proc = BotProcess.start(
            workdir=tmp_path_factory.mktemp(workdir_name),
            db_url=db_url,
            slack=slack,
            together=together,
            **options,
        )
        started.append(proc)
        return proc

    yield launch
    # Every process is asked to stop at once; their shutdowns overlap, and with the
    # next test (`StoppingBots` waits for them).
    for proc in started:
        proc.request_stop()
    for proc in started:
        print(proc.log_tail())  # shown by pytest only when the test fails
        stopping_bots.hand_over(proc)


@pytest.fixture
def start_bot(launch_bot: BotLauncher) -> BotFactory:
    """Start real, ready `rl-bot serve` processes with extra environment."""

    def factory(**env: str) -> BotProcess:
        return launch_bot(env=env)

    return factory


@pytest.fixture
def bot(start_bot: BotFactory) -> BotProcess:
    return start_bot()
