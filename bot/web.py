"""The HTTP surface: Slack events through Bolt, health, readiness and metrics."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import uvicorn
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.migrations import head_revision, read_revision
from bot.runtime import Runtime
from bot.scheduler import Ticker

log = logging.getLogger(__name__)


def create_web_app(
    rt: Runtime,
    bolt: AsyncApp,
    *,
    run_scheduler: bool = True,
    socket_connected: Callable[[], Awaitable[bool]] | None = None,
    http_events: bool = True,
) -> Starlette:
    handler = AsyncSlackRequestHandler(bolt)
    ticker = Ticker(rt)

    async def events(request: Request) -> Response:
        started = time.monotonic()
        try:
            if not _timestamp_is_a_number(request.headers.get("x-slack-request-timestamp")):
                # Bolt's verifier would raise on int("...") and answer 500.
                return Response(status_code=401)
            return await handler.handle(request)
        finally:
            rt.metrics.ack_seconds.observe(time.monotonic() - started)

    async def healthz(_: Request) -> Response:
        if socket_connected is not None and not await socket_connected():
            return JSONResponse({"ok": False, "socket": "disconnected"}, status_code=503)
        return JSONResponse({"ok": True})

    async def readyz(_: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            async with rt.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
                current = await read_revision(conn)
            head = head_revision(rt.settings.database_url)
            checks["database"] = "ok"
            checks["migrations"] = "ok" if current == head else f"at {current}, head is {head}"
        except Exception as exc:
            checks["database"] = f"unreachable ({type(exc).__name__})"
        try:
            await rt.slack.auth_test()
            checks["slack"] = "ok"
        except SlackApiError as exc:
            checks["slack"] = str(exc.response.get("error") or "error")
        except Exception as exc:
            checks["slack"] = f"unreachable ({type(exc).__name__})"
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse({"ok": ok, "checks": checks}, status_code=200 if ok else 503)

    async def metrics(_: Request) -> Response:
        body, content_type = rt.metrics.render()
        return Response(body, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if run_scheduler:
            ticker.start()
        log.info("rl-bot ready", extra={"replica": rt.owner})
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


def _timestamp_is_a_number(value: str | None) -> bool:
    """A missing timestamp is left to Bolt (401); a malformed one is refused here."""
    if value is None:
        return True
    try:
        int(value)
    except ValueError:
        return False
    return True


def http_server(app: Starlette, *, host: str, port: int) -> uvicorn.Server:
    """uvicorn with our logging, no access log, and time for leases on SIGTERM."""
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=25,
        )
    )
