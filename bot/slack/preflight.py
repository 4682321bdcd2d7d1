"""The secrets `serve` and `socket` need, tried once before the bot starts.

A token Slack refuses, or a key Together refuses, will not start working by
waiting, and a bot running on one only shows users Slack's stock "please
reinstall" or a card that never comes: the CLI stops at once with one line
naming the setting (exit code 2). A service that cannot be reached may come
back, so the bot starts anyway, says so once, and `/readyz` answers 503 until
a later check gets through (`bot.slack.web`).

The words here are for a terminal and a log, naming settings; Slack users see
`bot.together.errors.USER_MESSAGES` instead.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import aiohttp
import httpx
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings.model import Settings
from bot.together.errors import TogetherError

#: the longest either check may take: a start-up waits for it
CHECK_SECONDS = 5.0
#: auth.test errors that mean the token itself is refused (not Slack being down)
SLACK_REFUSALS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)

State = Literal["ok", "refused", "unreachable"]


@dataclass(frozen=True)
class Verdict:
    """One secret's check: `setting` is the name a person fixes it under."""

    setting: str
    state: State
    detail: str = ""

    @property
    def readiness(self) -> str:
        """The value `/readyz` shows for it."""
        return "ok" if self.state == "ok" else f"{self.state} ({self.detail})"


async def check_slack(slack: AsyncWebClient) -> Verdict:
    """`auth.test` with the bot token, once (the client should not retry)."""
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            await slack.auth_test()
    except SlackApiError as exc:
        error = str(exc.response.get("error") or "error")
        state: State = "refused" if error in SLACK_REFUSALS else "unreachable"
        return Verdict("SLACK_BOT_TOKEN", state, f"Slack answered {error}")
    except Exception as exc:
        return Verdict("SLACK_BOT_TOKEN", "unreachable", why_unreachable(exc, "Slack"))
    return Verdict("SLACK_BOT_TOKEN", "ok")


async def check_together(settings: Settings, session: aiohttp.ClientSession) -> Verdict:
    """One list request of one session: the cheapest call the key must be good for.
    Over aiohttp, as Slack's check: a new httpx client costs its TLS set-up (a
    noticeable part of a start), and this request needs nothing of the Together client."""
    key = settings.together_api_key
    url = f"{settings.together_base_url.rstrip('/')}/rl/training-sessions?limit=1"
    headers = {"Authorization": f"Bearer {key.get_secret_value() if key else ''}"}
    seconds = min(settings.together_timeout_seconds, CHECK_SECONDS)
    try:
        async with asyncio.timeout(seconds), session.get(url, headers=headers) as response:
            status = response.status
    except Exception as exc:
        return Verdict("TOGETHER_API_KEY", "unreachable", why_unreachable(exc, "Together"))
    if status in (401, 403):
        return Verdict("TOGETHER_API_KEY", "refused", f"Together answered HTTP {status}")
    if status >= 300:
        return Verdict("TOGETHER_API_KEY", "unreachable", f"Together answered HTTP {status}")
    return Verdict("TOGETHER_API_KEY", "ok")


async def check_secrets(settings: Settings) -> list[Verdict]:
    """Both checks at once, on one aiohttp session and clients that do not retry."""
    bot_token = settings.slack_bot_token
    async with aiohttp.ClientSession() as session:
        slack = AsyncWebClient(
            token=bot_token.get_secret_value() if bot_token else "",
            base_url=settings.slack_api_base,
            timeout=int(CHECK_SECONDS),
            session=session,
            retry_handlers=[],
        )
        return list(await asyncio.gather(check_slack(slack), check_together(settings, session)))


async def recheck_together(settings: Settings) -> str:
    """/readyz's check of the key, until one gets through."""
    async with aiohttp.ClientSession() as session:
        return (await check_together(settings, session)).readiness


def together_words(exc: TogetherError) -> str:
    """What a failed Together request means, in a terminal's words."""
    if exc.kind == "auth":
        return f"Together refused TOGETHER_API_KEY (HTTP {exc.status})"
    if exc.kind == "rate_limited":
        return "Together is rate limiting this key (HTTP 429)"
    if exc.kind == "bad_response":
        return f"Together sent an answer rl-bot could not read ({exc.detail or 'no detail'})"
    if exc.status is not None:
        return f"Together answered HTTP {exc.status}"
    cause = exc.__cause__
    if cause is None or exc.detail == "timed out":
        return "Together did not answer within TOGETHER_TIMEOUT_SECONDS"
    return why_unreachable(cause, "Together")


def why_unreachable(exc: BaseException, service: str) -> str:
    """A connection failure in plain words: a name that does not resolve is not
    a server that is slow."""
    for link in _chain(exc):
        if isinstance(link, socket.gaierror):
            return f"cannot resolve {service}'s host name ({link.strerror or link})"
        if isinstance(link, TimeoutError | httpx.TimeoutException):
            return f"{service} did not answer in time"
        if isinstance(link, ConnectionRefusedError):
            return f"{service} refused the connection"
    return f"cannot connect to {service} ({type(exc).__name__})"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, what caused it, and the OS error a connector error wraps."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        todo += [e for e in (link.__cause__, link.__context__) if e is not None]
        wrapped = getattr(link, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(wrapped, BaseException):
            todo.append(wrapped)
