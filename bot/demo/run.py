"""Starting the demo: the simulated services and world, the real bot wired to them
and nothing else, and the page.

The bot is the one `rl-bot serve` runs (runtime, Bolt app, web app with its poller,
outbox delivery and jobs), listening on a port of its own on 127.0.0.1; the page
reaches it only through signed HTTP, as Slack would. Every secret and every URL of
the settings is set here, and nothing else is read: no `.env` and no environment
variable can point the demo at a real Slack, Together or W&B, or tune it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
import sys
import tempfile
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from bot.demo.links import RUNS_PATH, STORAGE_PATH
from bot.demo.web import Page, create_page_app
from bot.demo.workspace import ONCALL, ONCALL_CHANNEL, YOU, DemoSlack
from bot.demo.world import ONCALL_OWNER, YOU_OWNER, World
from bot.settings.model import Settings
from bot.simulated.together import FakeTogether
from bot.simulated.wandb import FakeWandb

TICK_SECONDS = 0.25
#: what the simulated services remember of the requests they served (tests read them;
#: a demo left running for days must not keep them all)
KEPT_REQUESTS = 2000


class _OwnSettings(Settings):
    """Settings from the values given and the defaults only: no `.env` and no
    environment. A container's environment holds the operator's tuning (and
    docker-compose puts `.env` there), which is not the demo's; a value the bot
    would refuse there must not stop the demo either."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        *_: PydanticBaseSettingsSource,
        **__: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def demo_settings(
    *,
    slack: DemoSlack,
    together: FakeTogether,
    wandb: FakeWandb,
    database_url: str,
    secret: str,
    bot_token: str,
) -> Settings:
    """The bot's settings for the demo: the simulated services, a quick pace, and
    every alert on, with thresholds the three-minute story reaches."""
    return _OwnSettings(
        slack_bot_token=bot_token,
        slack_signing_secret=secret,
        slack_app_token=None,
        slack_api_url=slack.api_url,
        together_api_key=together.api_key,
        together_base_url=together.base_url,
        wandb_api_key=wandb.api_key,
        wandb_base_url=wandb.url,
        database_url=database_url,
        host="127.0.0.1",
        oncall_channel=ONCALL_CHANNEL,
        oncall_mention=None,
        allowed_team_ids=frozenset(),
        allowed_channel_ids=frozenset(),
        stop_allowed_user_ids=frozenset({YOU, ONCALL}),
        stop_allowed_usergroup=None,
        created_by_user_map={YOU_OWNER: YOU, ONCALL_OWNER: ONCALL},
        watch_all_errors=True,
        watch_idle_resources=True,
        idle_resource_alert_minutes=1,
        stall_after_minutes=1,
        creating_alert_after_minutes=0,
        oncall_on_metric=True,
        poll_interval_seconds=2,
        poll_min_interval_seconds=1,
        delivery_interval_seconds=0.5,
        channel_min_interval_seconds=0,
        wandb_refresh_seconds=30,
        spend_refresh_seconds=30,
        fault_crash_at=None,
        replica_id="demo",
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Quiet(uvicorn.Server):
    """A server that leaves signals to the demo, which stops both servers at once."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def run_until_up(self) -> asyncio.Task[None]:
        """Start serving; return once it listens (or has already ended)."""
        up = asyncio.Event()
        original = self.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await original(sockets)
            up.set()

        self.startup = startup  # type: ignore[method-assign]
        task = asyncio.create_task(self.serve())
        waiting = asyncio.create_task(up.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        return task


@dataclass
class Demo:
    slack: DemoSlack
    together: FakeTogether
    wandb: FakeWandb
    world: World
    settings: Settings
    secret: str
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, *, speed: float, port: int) -> Demo:
        """The simulated services and the world at minute 0; the settings pointing at them.

        The database is always a temporary SQLite file of its own, whatever DATABASE_URL
        says: pointed at a real database, the demo would be one more replica sending its
        outbox to the simulated Slack. Links the simulated services hand out (a thread's
        permalink, a W&B run, a checkpoint's download) lead to the page on `port`.
        """
        page_url = f"http://127.0.0.1:{port}"
        # Keys of this run only: the simulated services listen on loopback ports that
        # another page or local user can reach, and a key in the source opens them.
        bot_token = f"xoxb-demo-{secrets.token_hex(16)}"
        slack = DemoSlack(page_url=page_url, bot_token=bot_token).start()
        slack.welcome()
        together = FakeTogether(api_key=f"demo-together-{secrets.token_hex(16)}").start()
        together.download_host = f"{page_url}{STORAGE_PATH}"
        wandb = FakeWandb(api_key=f"demo-wandb-{secrets.token_hex(16)}").start()
        world = World(together, wandb, speed=speed, runs_url=f"{page_url}{RUNS_PATH}")
        world.tick()
        tmp = tempfile.TemporaryDirectory(prefix="rl-bot-demo-")
        database_url = f"sqlite:///{Path(tmp.name) / 'demo.db'}"
        secret = secrets.token_hex(16)
        settings = demo_settings(
            slack=slack,
            together=together,
            wandb=wandb,
            database_url=database_url,
            secret=secret,
            bot_token=bot_token,
        )
        return cls(slack, together, wandb, world, settings, secret, tmp)

    def stop(self) -> None:
        for server in (self.slack, self.together, self.wandb):
            server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def serve(self, *, host: str, port: int, open_browser: bool) -> int:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                print(
                    f"rl-bot: cannot listen on {host}:{port} ({exc.strerror}); "
                    "pick another port with --port",
                    file=sys.stderr,
                )
                return 1
        return asyncio.run(self._serve(host, port, open_browser))

    async def _serve(self, host: str, port: int, open_browser: bool) -> int:
        from bot.runtime import build_runtime
        from bot.slack.app import build_app
        from bot.slack.web import create_web_app

        rt = build_runtime(self.settings)
        bot_port = _free_port()
        bot = _Quiet(
            uvicorn.Config(
                create_web_app(rt, build_app(rt)),
                host="127.0.0.1",
                port=bot_port,
                log_config=None,
                access_log=False,
            )
        )
        async with httpx.AsyncClient(timeout=30) as http:
            page = Page(
                slack=self.slack,
                world=self.world,
                bot_url=f"http://127.0.0.1:{bot_port}",
                secret=self.secret,
                http=http,
            )
            ui = _Quiet(
                uvicorn.Config(
                    create_page_app(page, port=port),
                    host=host,
                    port=port,
                    log_config=None,
                    access_log=False,
                    timeout_graceful_shutdown=2,
                )
            )
            loop = asyncio.get_running_loop()

            def stop_all() -> None:
                page.stopping.set()
                bot.should_exit = ui.should_exit = True

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop_all)
            bot_task = await bot.run_until_up()
            ui_task = await ui.run_until_up()
            ticking = asyncio.create_task(self._tick(page.stopping))
            if ui.started:
                url = f"http://127.0.0.1:{port}"
                print(f"rl-bot demo: Open {url}  (Ctrl-C stops it)", flush=True)
                if open_browser:
                    webbrowser.open(url)
            else:
                stop_all()
            await asyncio.gather(ui_task, return_exceptions=True)
            stop_all()
            await asyncio.gather(bot_task, ticking, return_exceptions=True)
        return 0 if ui.started else 1

    def forget_old_requests(self) -> None:
        for server, names in (
            (self.together, ("requests", "paths", "auth_headers")),
            (self.slack, ("calls", "response_attempts")),
            (self.wandb, ("calls",)),
        ):
            with server._lock:
                for name in names:
                    del getattr(server, name)[:-KEPT_REQUESTS]

    async def _tick(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await asyncio.to_thread(self.world.tick)
            self.forget_old_requests()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), TICK_SECONDS)
