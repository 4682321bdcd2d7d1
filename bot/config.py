"""One settings class, read from the environment and `.env`.

Secrets are `SecretStr` so that a stray `repr()` or log line never shows them.
Which settings are required depends on the run mode, so the check is a
function (`problems_for`) rather than pydantic's "required" flag: `rl-bot show`
needs only the Together key, `rl-bot serve` needs Slack too.
"""

from __future__ import annotations

import os
import socket
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

Mode = Literal["serve", "socket", "show", "migrate", "poll"]


def _csv(value: object) -> object:
    if isinstance(value, str):
        return frozenset(v.strip() for v in value.split(",") if v.strip())
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"

    together_api_key: SecretStr | None = None
    together_base_url: str = "https://api.together.ai/v1"
    together_timeout_seconds: float = 10.0
    together_max_rps: float = Field(50.0, gt=0)
    together_outage_alert_seconds: float = 300.0
    # A Together answer larger than this is refused unread (a transient bad response).
    together_max_response_bytes: int = Field(4 << 20, ge=1024)

    database_url: str = "sqlite:///./rl-bot.db"

    # The longest a watched session waits between polls; the interval in use is
    # the shortest that keeps a round of polls within TOGETHER_REQUESTS_PER_MINUTE,
    # and never below POLL_MIN_INTERVAL_SECONDS (unless this is lower).
    poll_interval_seconds: float = Field(60.0, gt=0)
    poll_min_interval_seconds: float = Field(5.0, gt=0)
    # What the whole bot may spend on Together, every replica together (0: no budget,
    # poll every POLL_INTERVAL_SECONDS); the poller sizes its interval to what the
    # others left, on this replica and the others (`bot.jobs.spend_exchange`).
    together_requests_per_minute: float = Field(120.0, ge=0)
    # auto: per cycle, one GET per session or the list pages, whichever costs less.
    poll_plan: Literal["auto", "get", "list"] = "auto"
    poll_concurrency: int = Field(16, ge=1, le=256)
    poll_batch_size: int = Field(5000, ge=1)
    delivery_interval_seconds: float = Field(1.0, gt=0)
    delivery_concurrency: int = Field(16, ge=1, le=256)
    channel_min_interval_seconds: float = Field(1.0, ge=0)
    lease_seconds: float = Field(120.0, gt=0)
    # A session is told gone only after Together's JSON 404 has lasted this long
    # (and came at least twice in a row): one 404 may be a deploy's hiccup.
    not_found_confirm_seconds: float = Field(180.0, ge=0)
    # Sent, dead and cancelled outbox rows are kept this long (for dedupe and digests).
    outbox_retention_days: float = Field(30.0, ge=2)

    oncall_channel: str | None = None
    oncall_mention: str | None = None
    broadcast_errors: bool = False

    # NoDecode: a comma-separated list, not JSON.
    allowed_team_ids: Annotated[frozenset[str], NoDecode] = frozenset()
    allowed_channel_ids: Annotated[frozenset[str], NoDecode] = frozenset()

    # Who may press "Stop session": listed users, or members of one user group.
    stop_allowed_user_ids: Annotated[frozenset[str], NoDecode] = frozenset()
    stop_allowed_usergroup: str | None = None
    # Org-wide error watch: list sessions in ERROR each cycle, alert on-call once each.
    watch_all_errors: bool = False
    watch_all_max_pages: int = Field(5, ge=1, le=100)
    # Stall watch (README "Stall and slow-start alerts"): a RUNNING session whose
    # step has not moved this long is told once in its threads (0: off; a
    # subscription's `stall=` overrides), and on-call is paged if ONCALL_ON_STALL;
    # a session still CREATING this long after its creation is told once (0: off).
    stall_after_minutes: float = Field(15.0, ge=0, le=7 * 24 * 60)
    oncall_on_stall: bool = False
    creating_alert_after_minutes: float = Field(30.0, ge=0, le=7 * 24 * 60)
    # Idle resources (README "Idle model resources"): a READY resource with no
    # CREATING or RUNNING session for IDLE_RESOURCE_ALERT_MINUTES is alerted once
    # in its sessions' threads and ONCALL_CHANNEL (0: off). Subscribed sessions'
    # resources are always followed (`idle_watch.watch_subscribed_idle`);
    # WATCH_IDLE_RESOURCES also lists READY resources org-wide for on-call.
    watch_idle_resources: bool = False
    idle_resource_alert_minutes: float = Field(20.0, ge=0, le=7 * 24 * 60)
    # Spend watch: the poll cycle reads the model resource of the sessions it
    # fetched and its price (cached an hour per shape), for the card. A read is
    # reused for SPEND_REFRESH_SECONDS (a pending, creating or stopping resource's
    # for at most 60 s) unless one of its sessions changed status, so a cycle
    # reads only the due resources, once each: a GET each, or pages of the live
    # resources list (100 a page) when fewer (`spend_watch.ResourceReader`).
    # Charged to the poller's round in the request budget. On unless turned off.
    # 300 s: a READY resource under a live session changes with the session (a
    # forced stop stops it, an idle-out expires it), which is read at once; at
    # 60 s, 2,000 resources cost a sixth of the default budget in list pages.
    spend_watch: bool = True
    spend_refresh_seconds: float = Field(300.0, ge=0, le=24 * 3600)
    # Together user id -> Slack user id, for "sessions you created" in App Home.
    created_by_user_map: Annotated[dict[str, str], NoDecode] = {}
    default_timezone: str = "UTC"

    host: str = "0.0.0.0"
    port: int = 3000
    # A request to /slack/events larger than this is refused with 413 unread.
    max_request_body_bytes: int = Field(1 << 20, ge=1024)
    body_read_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description=(
            "How long a request to /slack/events may take to send its whole body; "
            "a slower one is answered 408 and its connection closed. Slack sends "
            "its requests at once."
        ),
    )
    unverified_body_budget_bytes: int = Field(
        8 << 20,
        ge=64 << 10,
        description=(
            "Bytes of /slack/events bodies not yet verified held at once, across all "
            "connections: each request reserves its Content-Length (MAX_REQUEST_BODY_BYTES "
            "without one) until its body is read, and one that does not fit is answered "
            "503 at once. Bodies over 64 KiB may take only three quarters of it, "
            "leaving room for Slack's small requests."
        ),
    )
    # /readyz reuses Slack's auth.test answer this long (a failure at most 10 s).
    readyz_slack_cache_seconds: float = Field(60.0, ge=0)
    log_level: str = "INFO"
    log_format: Literal["json", "console"] = "json"
    replica_id: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")

    # Test-only: crash the process (SIGKILL-like `os._exit`) at a named step.
    fault_crash_at: str | None = None

    _split_lists = field_validator(
        "allowed_team_ids", "allowed_channel_ids", "stop_allowed_user_ids", mode="before"
    )(_csv)

    @field_validator("created_by_user_map", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        if isinstance(value, str):
            pairs = (item.split("=", 1) for item in value.split(",") if "=" in item)
            return {k.strip(): v.strip() for k, v in pairs if k.strip() and v.strip()}
        return value

    @field_validator("default_timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @field_validator(
        "oncall_channel",
        "oncall_mention",
        "slack_app_token",
        "stop_allowed_usergroup",
        mode="before",
    )
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def slack_api_base(self) -> str:
        return self.slack_api_url if self.slack_api_url.endswith("/") else self.slack_api_url + "/"

    def secrets(self) -> list[str]:
        """Every secret value, for log redaction."""
        values = [
            s.get_secret_value()
            for s in (
                self.slack_bot_token,
                self.slack_signing_secret,
                self.slack_app_token,
                self.together_api_key,
            )
            if s is not None
        ]
        from sqlalchemy.engine import make_url

        try:
            password = make_url(self.database_url).password
        except Exception:
            password = None
        return values + ([str(password)] if password else [])

    def problems_for(self, mode: Mode) -> list[str]:
        """Every configuration problem for `mode`, one human line each."""
        problems: list[str] = []

        def need(name: str, value: SecretStr | None) -> str | None:
            if value is None or not value.get_secret_value().strip():
                problems.append(f"{name.upper()} is not set")
                return None
            return value.get_secret_value()

        if mode in ("serve", "socket", "poll"):
            bot = need("slack_bot_token", self.slack_bot_token)
            if bot is not None and not bot.startswith("xoxb-"):
                kind = (
                    "an app-level token (xapp-)" if bot.startswith("xapp-") else "not a bot token"
                )
                problems.append(f"SLACK_BOT_TOKEN is {kind}; it must start with xoxb-")
        if mode == "serve":
            need("slack_signing_secret", self.slack_signing_secret)
        if mode == "socket":
            app = need("slack_app_token", self.slack_app_token)
            if app is not None and not app.startswith("xapp-"):
                problems.append("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
        if mode in ("serve", "socket", "show", "poll"):
            need("together_api_key", self.together_api_key)
        if not self.together_base_url.startswith(("https://", "http://")):
            problems.append("TOGETHER_BASE_URL must be an http(s) URL")
        try:
            async_url(self.database_url)
        except ValueError as exc:
            problems.append(f"DATABASE_URL is not usable: {exc}")
        return problems


_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
}
_ASYNC = {"sqlite+aiosqlite", "postgresql+asyncpg"}


def async_url(url: str) -> str:
    """Return `url` with an async driver; raise ValueError for anything else."""
    if "://" not in url:
        raise ValueError("expected a URL such as sqlite:///./rl-bot.db or postgresql://host/db")
    scheme, rest = url.split("://", 1)
    scheme = _DRIVERS.get(scheme, scheme)
    if scheme not in _ASYNC:
        raise ValueError(f"unsupported database scheme {scheme.split('+')[0]!r}")
    try:
        parsed = make_url(f"{scheme}://{rest}")
    except ArgumentError as exc:
        raise ValueError("cannot parse it") from exc
    return parsed.render_as_string(hide_password=False)


def is_sqlite(url: str) -> bool:
    """Whether the URL names the embedded SQLite database."""
    return async_url(url).startswith("sqlite")
