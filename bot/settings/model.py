"""One settings class, read from the environment and `.env`.

Secrets are `SecretStr` so that a stray `repr()` or log line never shows them.
Which settings are required depends on the run mode, so the check is a
function (`problems_for`) rather than pydantic's "required" flag: `rl-bot show`
needs only the Together key, `rl-bot serve` needs Slack too.

Every setting carries a plain-words description and a tier, so that
`docs/configuration.md` (written by `bot.settings.doc`) and `.env.example` follow
this class: "user" is what a deployment sets (secrets, the database, on-call,
allowlists, feature switches), "tuning" has defaults that suit most teams, and
"test-only" exists for the tests' fake servers, crash injection and shortened windows.
"""

from __future__ import annotations

import os
import socket
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.settings.charts import ChartSettings
from bot.settings.placeholders import is_placeholder
from bot.settings.tiers import test_only as _test_only
from bot.settings.tiers import tuning as _tuning
from bot.settings.tiers import user as _user

Mode = Literal["serve", "socket", "show", "migrate", "poll"]


def _csv(value: object) -> object:
    if isinstance(value, str):
        return frozenset(v.strip() for v in value.split(",") if v.strip())
    return value


_WEEK_MINUTES = 7 * 24 * 60
#: Slack's own request timeout: a lease shorter than this cannot hold one post
MIN_LEASE_SECONDS = 10.0


class Settings(BaseSettings, ChartSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    slack_bot_token: SecretStr | None = _user(
        None, "Bot User OAuth Token (OAuth & Permissions), `xoxb-…`: serve and socket need it."
    )
    slack_signing_secret: SecretStr | None = _user(
        None, "Signing Secret (Basic Information): serve checks every request with it."
    )
    slack_app_token: SecretStr | None = _user(
        None,
        "App-level token with `connections:write`, `xapp-…`: only socket (Socket Mode) needs it.",
    )
    slack_api_url: str = _test_only(
        "https://slack.com/api/", "Slack Web API base URL; the tests point it at a fake Slack."
    )

    together_api_key: SecretStr | None = _user(
        None, "Together API key: serve, socket and show need it; sent only to TOGETHER_BASE_URL."
    )
    together_base_url: str = _test_only(
        "https://api.together.ai/v1",
        "Together API base URL; the tests point it at a fake Together.",
    )
    together_timeout_seconds: float = _tuning(
        10.0,
        "One deadline for a whole Together request, body included, in seconds.",
        gt=0,
        le=300,  # beyond this, as good as no deadline
        allow_inf_nan=False,
    )
    together_max_rps: float = _tuning(50.0, "Together requests per second, at most.", gt=0)
    together_outage_alert_seconds: float = _tuning(
        300.0, "On-call hears once when Together has been unreachable this long (and recovered)."
    )
    together_max_response_bytes: int = _tuning(
        4 << 20, "A larger Together answer is refused unread: a transient bad response.", ge=1024
    )

    database_url: str = _user(
        "sqlite:///./rl-bot.db",
        "A SQLite file (one process, migrates itself) or postgresql://user:pass@host/db "
        "(several replicas; `rl-bot migrate` first). The async driver is added for you.",
    )

    poll_interval_seconds: float = _tuning(
        60.0,
        "The longest a watched session waits between polls; the interval in use is the "
        "shortest that keeps a round within TOGETHER_REQUESTS_PER_MINUTE.",
        gt=0,
    )
    poll_min_interval_seconds: float = _tuning(
        2.0, "The shortest poll interval (unless POLL_INTERVAL_SECONDS is lower).", gt=0
    )
    together_requests_per_minute: float = _tuning(
        120.0,
        "What the whole bot may send to Together, every replica together (0: no budget, "
        "poll every POLL_INTERVAL_SECONDS), shared out by priority with a floor each.",
        ge=0,
    )
    poll_budget_share: float = _tuning(
        0.5,
        "The share of TOGETHER_REQUESTS_PER_MINUTE the poller always keeps (its floor; "
        "the other tiers keep 10% each): what people ask beyond theirs never slows it more.",
        ge=0,
        le=1,
    )
    together_budget_window_seconds: float = _test_only(
        60.0,
        "The window TOGETHER_REQUESTS_PER_MINUTE is counted over, scaled to a minute (at "
        "least POLL_INTERVAL_SECONDS); the tests shorten it to watch whole windows.",
        gt=0,
    )
    poll_plan: Literal["auto", "get", "list"] = _tuning(
        "auto", "get: one GET per session; list: the live list pages; auto: the cheaper."
    )
    poll_concurrency: int = _tuning(
        16, "Concurrent Together requests per poll cycle.", ge=1, le=256
    )
    poll_batch_size: int = _tuning(5000, "Sessions claimed per poll batch.", ge=1)
    delivery_interval_seconds: float = _tuning(1.0, "Seconds between outbox delivery passes.", gt=0)
    delivery_concurrency: int = _tuning(
        16, "Concurrent Slack posts per delivery pass.", ge=1, le=256
    )
    delivery_max_attempts: int = _tuning(
        30,
        "Attempts before a message Slack keeps refusing is set aside (on-call told once); "
        "its channel moves on.",
        ge=1,
    )
    channel_min_interval_seconds: float = _tuning(
        1.0, "The least time between two posts to one channel: bursts are paced, not dropped.", ge=0
    )
    card_redraws_per_minute: float = _tuning(
        40.0,
        "Card updates a minute, all replicas', up to which routine redraws (steps/min, "
        "spend) are sent; Slack takes about 50.",
        ge=1,
    )
    lease_seconds: float = _tuning(
        15.0,
        "A replica's claim on a session, outbox row or job, unrenewed (the database's "
        "clock): renewed every third of it, taken over after it. At least Slack's 10 s "
        "timeout.",
        ge=1,
        le=3600,
        allow_inf_nan=False,
    )
    not_found_confirm_seconds: float = _tuning(
        180.0,
        "A session is told gone only after Together's JSON 404 has lasted this long (and "
        "came at least twice in a row): one 404 may be a deploy's hiccup.",
        ge=0,
    )
    outbox_retention_days: float = _tuning(
        30.0, "Sent, dead and cancelled outbox rows are kept this long (dedupe, digests).", ge=2
    )
    watch_retention_days: float = _tuning(
        30.0,
        "Ended subscriptions (and their sent messages) are deleted this long after they "
        "ended, and a watched session no subscription refers to any more this long after "
        "its watch stopped.",
        ge=2,
    )

    oncall_channel: str | None = _user(
        None, "Channel id (C…) for on-call alerts: errors, outages, the org-wide watches."
    )
    oncall_mention: str | None = _user(
        None, "Who on-call alerts mention, e.g. `<!subteam^S0123ABC>` or `<@U0123ABC>`."
    )
    broadcast_errors: bool = _user(
        False, "Also show error replies in the channel itself (reply_broadcast)."
    )

    # NoDecode: a comma-separated list, not JSON.
    allowed_team_ids: Annotated[frozenset[str], NoDecode] = _user(
        frozenset(), "Slack team ids (T…) the bot answers, comma-separated; empty: any."
    )
    allowed_channel_ids: Annotated[frozenset[str], NoDecode] = _user(
        frozenset(),
        "Channel ids (C…/G…) the bot answers and posts in; empty: any (not App Home, "
        "nor buttons on the bot's own DMs).",
    )
    stop_allowed_user_ids: Annotated[frozenset[str], NoDecode] = _user(
        frozenset(),
        "User ids (U…) who may press Stop, Keep alive and Download; with no user group "
        "either, nobody may.",
    )
    stop_allowed_usergroup: str | None = _user(
        None, "A user group id (S…) whose members may press Stop, Keep alive and Download."
    )
    watch_all_errors: bool = _user(
        False, "List every session in ERROR each interval; alert on-call once each, watched or not."
    )
    watch_all_max_pages: int = _tuning(
        5, "Pages (100 each) per interval for the org-wide error and idle lists.", ge=1, le=100
    )
    follow_max_pages: int = _tuning(
        20,
        "Pages (100 each) of live sessions a follow-rule discovery may list when no poller "
        "pass of them is at hand.",
        ge=1,
        le=1000,
    )
    stall_after_minutes: float = _tuning(
        15.0,
        "A watched RUNNING session whose step has not moved this long is told once in its "
        "threads (0: off; a subscription's `stall=` overrides).",
        ge=0,
        le=_WEEK_MINUTES,
    )
    oncall_on_stall: bool = _user(False, "Also page ONCALL_CHANNEL about each stall.")
    oncall_repage_minutes: float = _user(
        0.0,
        "Page ONCALL_CHANNEL once more about an alert nobody acknowledged this long (0: never).",
        ge=0,
        le=24 * 60,
    )
    creating_alert_after_minutes: float = _tuning(
        30.0,
        "A session CREATING this long after its creation is told once (0: off).",
        ge=0,
        le=_WEEK_MINUTES,
    )
    watch_idle_resources: bool = _user(
        False, "List the org's READY model resources each interval; alert on-call about idle ones."
    )
    idle_resource_alert_minutes: float = _tuning(
        20.0,
        "A READY model resource with no CREATING or RUNNING session this long is alerted "
        "once, in its sessions' threads and on-call (0: every idle alert off).",
        ge=0,
        le=_WEEK_MINUTES,
    )
    spend_watch: bool = _user(
        True,
        "Read each watched session's model resource and price for the card (status, GPUs, "
        "queue, estimated spend); counted in the request budget.",
    )
    read_retry_seconds: float = _tuning(
        30.0,
        "A failed resource or price read is tried again after this long, doubling "
        "with each failure in a row (15 minutes at most).",
        ge=1,
        le=900,
    )
    spend_refresh_seconds: float = _tuning(
        300.0,
        "A resource read is reused this long unless one of its sessions changed status "
        "(a pending, creating or stopping resource's: 60 s at most).",
        ge=0,
        le=24 * 3600,
    )
    created_by_user_map: Annotated[dict[str, str], NoDecode] = _user(
        {}, "Together user id=Slack user id pairs, comma-separated, for `ls mine` and App Home."
    )
    default_timezone: str = _tuning("UTC", "Time zone of a `digest on HH:MM` that names none.")

    host: str = _tuning("0.0.0.0", "Listen address of the HTTP server.")
    port: int = _tuning(3000, "Listen port of the HTTP server (`--port` overrides it).")
    max_request_body_bytes: int = _tuning(
        1 << 20, "A larger request to /slack/events gets 413, unread.", ge=1024
    )
    body_read_timeout_seconds: float = _tuning(
        5.0,
        "A request to /slack/events slower than this to send its body gets 408 and is closed.",
        gt=0,
    )
    unverified_body_budget_bytes: int = _tuning(
        8 << 20,
        "Bytes of /slack/events bodies not yet verified held at once, all connections together; "
        "a request that does not fit gets 503 (bodies over 64 KiB may take three quarters).",
        ge=64 << 10,
    )
    readyz_slack_cache_seconds: float = _tuning(
        60.0, "/readyz reuses Slack's auth.test answer this long (a failure 10 s at most).", ge=0
    )
    log_level: str = _tuning("INFO", "DEBUG, INFO, WARNING or ERROR.")
    log_format: Literal["json", "console"] = _tuning(
        "json", "json (one object per line) or console (for people)."
    )
    replica_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        description="This process's name in leases and logs, one per replica.",
        json_schema_extra={"tier": "tuning", "default": "<hostname>-<pid>"},
    )

    allow_short_leases: bool = _test_only(
        False,
        "Let LEASE_SECONDS go below 10 s (down to 1 s), for the tests' quick takeovers; "
        "never in a deployment.",
    )
    fault_crash_at: str | None = _test_only(
        None, "Crash the process at a named step, for the crash tests; never in a deployment."
    )

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
        """Every secret value, for log redaction (a placeholder is no secret). The
        password in DATABASE_URL is the store's to find (`bot.store.database_url`)."""
        return [
            s.get_secret_value()
            for s in (
                self.slack_bot_token,
                self.slack_signing_secret,
                self.slack_app_token,
                self.together_api_key,
                self.wandb_api_key,
            )
            if s is not None and not is_placeholder(s.get_secret_value())
        ]

    def problems_for(self, mode: Mode) -> list[str]:
        """Every configuration problem for `mode`, one human line each. Whether
        DATABASE_URL is usable is the store's to say (`bot.store.database_url`)."""
        problems: list[str] = []

        def need(name: str, value: SecretStr | None) -> str | None:
            if value is None or not value.get_secret_value().strip():
                problems.append(f"{name.upper()} is not set")
                return None
            if is_placeholder(value.get_secret_value()):
                problems.append(
                    f"{name.upper()} is still .env.example's placeholder: put the real value in .env"
                )
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
        if self.lease_seconds < MIN_LEASE_SECONDS and not self.allow_short_leases:
            problems.append(
                f"LEASE_SECONDS is {self.lease_seconds:g}; it must be at least "
                f"{MIN_LEASE_SECONDS:g} (Slack's timeout), so one post fits in a lease"
            )
        if not self.together_base_url.startswith(("https://", "http://")):
            problems.append("TOGETHER_BASE_URL must be an http(s) URL")
        return problems
