"""The HTTP surface: Slack events through Bolt, health, readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import uvicorn
from pydantic import SecretStr
from slack_bolt.adapter.starlette.async_handler import (
    to_async_bolt_request,
    to_starlette_response,
)
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.jobs.ticker import Ticker
from bot.runtime import Runtime
from bot.slack.body_budget import BodyBudget
from bot.slack.preflight import Verdict, recheck_together
from bot.store.migrations import head_revision, reachable_revision

log = logging.getLogger(__name__)

# /readyz asks Slack's auth.test again this soon after a failure (seconds);
# after a success, READYZ_SLACK_CACHE_SECONDS later. Together's key, once a check
# got through, is not asked again: the poller's own errors say when it fails.
SLACK_CHECK_FAILURE_TTL = 10.0


def create_web_app(
    rt: Runtime,
    bolt: AsyncApp,
    *,
    run_scheduler: bool = True,
    socket_connected: Callable[[], Awaitable[bool]] | None = None,
    http_events: bool = True,
    checked: Sequence[Verdict] = (),
) -> Starlette:
    """`checked`: the start-up checks of the secrets (`bot.slack.preflight`), the first
    answers of /readyz's own."""
    ticker = Ticker(rt)
    ttl = rt.settings.readyz_slack_cache_seconds
    failure_ttl = min(ttl, SLACK_CHECK_FAILURE_TTL)
    first = {v.setting: v.readiness for v in checked}
    slack_check = CachedCheck(lambda: _slack_auth(rt), ttl=ttl, failure_ttl=failure_ttl).seeded(
        first.get("SLACK_BOT_TOKEN")
    )
    together_check = CachedCheck(
        lambda: recheck_together(rt.settings), ttl=math.inf, failure_ttl=failure_ttl
    ).seeded(first.get("TOGETHER_API_KEY"))
    settings = rt.settings
    gate = SlackRequestGate(
        settings.slack_signing_secret,
        settings.max_request_body_bytes,
        budget=BodyBudget(settings.unverified_body_budget_bytes, settings.max_request_body_bytes),
        read_timeout=settings.body_read_timeout_seconds,
    )

    async def events(request: Request) -> Response:
        started = time.monotonic()
        try:
            body = await gate.verified_body(request)
            if isinstance(body, Response):
                return body
            try:
                bolt_request = to_async_bolt_request(request, body)
            except Exception:
                # Signed, but not a payload Slack sends (not UTF-8, not JSON, not an object).
                log.warning("unreadable Slack request", extra={"bytes": len(body)})
                return Response(status_code=400)
            return to_starlette_response(await bolt.async_dispatch(bolt_request))
        finally:
            rt.metrics.ack_seconds.observe(time.monotonic() - started)

    async def healthz(_: Request) -> Response:
        if socket_connected is not None and not await socket_connected():
            return JSONResponse({"ok": False, "socket": "disconnected"}, status_code=503)
        return JSONResponse({"ok": True})

    async def readyz(_: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            current = await reachable_revision(rt.engine)
            head = head_revision(rt.settings.database_url)
            checks["database"] = "ok"
            checks["migrations"] = "ok" if current == head else f"at {current}, head is {head}"
        except Exception as exc:
            checks["database"] = f"unreachable ({type(exc).__name__})"
        checks["slack"] = await slack_check.result()
        checks["together"] = await together_check.result()
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse({"ok": ok, "checks": checks}, status_code=200 if ok else 503)

    async def metrics(_: Request) -> Response:
        body, content_type = rt.metrics.render()
        return Response(body, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if run_scheduler:
            ticker.start()
        try:
            yield
        finally:
            log.info("shutting down: finishing work and releasing leases")
            await ticker.shutdown()
            await rt.aclose()

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    if http_events:
        routes.append(Route("/slack/events", events, methods=["POST"]))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.ticker = ticker
    return app


class TooLarge(Exception):
    pass


class SlackRequestGate:
    """What must hold before Bolt sees a request: a body of bounded size, read
    without buffering more than the cap, within `read_timeout` seconds and
    within the `budget` of unverified bytes all requests share, and a valid
    Slack signature over its raw bytes. Nothing of an unverified body is
    decoded, parsed or logged.

    A body that is too slow or does not fit the budget is answered with
    `Connection: close`, so its sender's socket goes too.

    Bolt's own verifier is switched off (`bot.slack.app`): it runs after Bolt
    has decoded and parsed the body, and logs the whole body when it fails."""

    def __init__(
        self,
        signing_secret: SecretStr | None,
        max_bytes: int,
        *,
        budget: BodyBudget,
        read_timeout: float,
    ) -> None:
        secret = signing_secret.get_secret_value() if signing_secret else ""
        self._verifier = SignatureVerifier(secret) if secret.strip() else None
        self._max = max_bytes
        self._budget = budget
        self._read_timeout = read_timeout

    async def verified_body(self, request: Request) -> bytes | Response:
        declared = request.headers.get("content-length")
        if declared is not None and not declared.isdigit():
            return self._refuse(400, "bad Content-Length", declared[:20])
        if declared is not None and int(declared) > self._max:
            return self._refuse(413, "too large", declared)
        timestamp = request.headers.get("x-slack-request-timestamp")
        signature = request.headers.get("x-slack-signature")
        if self._verifier is None or not timestamp or not signature:
            return self._refuse(401, "unsigned", declared)
        if not _is_int(timestamp):  # the verifier would raise on int() and answer 500
            return self._refuse(401, "bad timestamp", declared)
        size = self._max if declared is None else int(declared)
        if not self._budget.take(size):
            return self._refuse(503, "unverified bodies over budget", declared, close=True)
        try:
            async with asyncio.timeout(self._read_timeout):
                body = await self._read(request)
        except TooLarge:
            return self._refuse(413, "too large", f">{self._max}")
        except TimeoutError:
            return self._refuse(408, "body too slow", declared, close=True)
        finally:
            self._budget.give_back(size)
        try:
            valid = self._verifier.is_valid(body, timestamp, signature)
        except UnicodeDecodeError:  # it decodes the body as UTF-8, as Slack sends it
            return self._refuse(400, "not UTF-8", len(body))
        if not valid:
            return self._refuse(401, "bad signature", len(body))
        return body

    async def _read(self, request: Request) -> bytes:
        """Count while reading, for chunked bodies that declare no length."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self._max:
                raise TooLarge
        return bytes(body)

    @staticmethod
    def _refuse(status: int, why: str, size: object, *, close: bool = False) -> Response:
        log.info("refused a Slack request (%s)", why, extra={"status": status, "bytes": size})
        return Response(status_code=status, headers={"Connection": "close"} if close else None)


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


class CachedCheck:
    """A readiness check that is run at most once per `ttl` seconds (failures are
    retried sooner), however many probes ask: `/readyz` is public and unauthenticated,
    so it must not turn each request into a call to Slack."""

    def __init__(
        self,
        check: Callable[[], Awaitable[str]],
        *,
        ttl: float,
        failure_ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self._ttl, self._failure_ttl = ttl, failure_ttl
        self._clock = clock
        self._value: str | None = None
        self._until = 0.0
        self._lock = asyncio.Lock()

    def seeded(self, value: str | None) -> CachedCheck:
        """Start from an answer already known (the start-up check), for its ttl."""
        if value is not None:
            self._value = value
            self._until = self._clock() + (self._ttl if value == "ok" else self._failure_ttl)
        return self

    async def result(self) -> str:
        async with self._lock:  # concurrent probes wait for one check
            if self._value is None or self._clock() >= self._until:
                self._value = await self._check()
                ttl = self._ttl if self._value == "ok" else self._failure_ttl
                self._until = self._clock() + ttl
            return self._value


async def _slack_auth(rt: Runtime) -> str:
    try:
        await rt.slack.client.auth_test()
    except SlackApiError as exc:
        return str(exc.response.get("error") or "error")
    except Exception as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok"


class _Server(uvicorn.Server):
    """uvicorn that says "rl-bot ready" once it listens (after the app's start-up),
    when told whose replica it serves."""

    def __init__(self, config: uvicorn.Config, *, replica: str | None) -> None:
        super().__init__(config)
        self._replica = replica

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._replica is not None:
            url = f"http://{self.config.host}:{self.config.port}"
            log.info("rl-bot ready on %s", url, extra={"replica": self._replica})


def http_server(
    app: Starlette, *, host: str, port: int, replica: str | None = None
) -> uvicorn.Server:
    """uvicorn with our logging, no access log, and time for leases on SIGTERM.
    With `replica`, it logs "rl-bot ready" once it listens; without (Socket Mode),
    the socket says when the bot is ready."""
    return _Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=25,
        ),
        replica=replica,
    )
