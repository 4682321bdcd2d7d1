"""The demo's page and its JSON: a Slack-like client for the simulated workspace.

The page draws what the simulated Slack holds, and turns what people type and click
into signed Slack requests to the bot's own `/slack/events`, over HTTP like Slack.
A server-sent event stream tells the page when anything changed (a post, a
`chat.update`, an answer) and where the clocks are: the real time since the demo
began (the bot's timers' clock) and the story's minute (where the sessions are).
Only the page itself may use any of this (`bot.demo.guard`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bot.demo.guard import SameOrigin
from bot.demo.links import RUNS_PATH, STORAGE_PATH, run_data, run_page, storage_file
from bot.demo.requests import (
    Click,
    PersonId,
    click_body,
    command_body,
    home_opened_body,
    signed,
)
from bot.demo.workspace import CHANNELS, NAMES, PEOPLE, Asked, DemoSlack
from bot.demo.world import MAX_SPEED, MAX_STEP_MINUTES, World

STATIC = resources.files("bot.demo") / "static"
#: the largest body the page's API reads (a typed message, a click): a bigger one is
#: refused before it is all in memory
MAX_BODY_BYTES = 64 * 1024

M = TypeVar("M", bound=BaseModel)


class BadBody(Exception):
    """A body the page's API refuses: too big (413), or not the JSON it takes (400)."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.response = JSONResponse({"error": error}, status_code=status)


async def read_body(request: Request, model: type[M], *, wanted: str | None = None) -> M:
    """The body as `model`, read at most `MAX_BODY_BYTES` far and parsed by pydantic's
    own JSON parser, whose nesting is bounded (Python's `json` raises RecursionError
    on deep nesting). `wanted`: the 400's words instead of pydantic's."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BadBody(413, f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        return model.model_validate_json(bytes(raw))
    except ValidationError as exc:
        raise BadBody(400, wanted or str(exc)) from None


class Typed(BaseModel):
    user: PersonId
    channel: str
    text: str
    thread_ts: str | None = None


class Advance(BaseModel):
    """A move of the story: a jump ahead, a new speed. Bounded: an infinite or huge
    jump would stop the world or write hours of history under its lock. Numbers
    only (strict): `true` or `"5"` is a mistake to refuse, not a step to take."""

    minutes: float = Field(0, ge=0, le=MAX_STEP_MINUTES, allow_inf_nan=False, strict=True)
    speed: float | None = Field(None, gt=0, le=MAX_SPEED, allow_inf_nan=False, strict=True)


class Dismiss(BaseModel):
    user: PersonId
    id: str


class Opened(BaseModel):
    user: PersonId


class Page:
    """The page's endpoints over one simulated workspace, world and bot."""

    def __init__(
        self, *, slack: DemoSlack, world: World, bot_url: str, secret: str, http: httpx.AsyncClient
    ) -> None:
        self.slack = slack
        self.world = world
        self.events_url = f"{bot_url}/slack/events"
        self.secret = secret
        self.http = http
        self.stopping = asyncio.Event()

    async def config(self, _: Request) -> Response:
        return JSONResponse(
            {
                "people": [p.__dict__ for p in PEOPLE],
                "names": NAMES,
                "channels": CHANNELS,
            }
        )

    async def conversation(self, request: Request) -> Response:
        channel = request.query_params.get("channel", "")
        user = request.query_params.get("user", "")
        messages = await asyncio.to_thread(self.slack.conversation, channel, user)
        return JSONResponse({"messages": messages})

    async def home(self, request: Request) -> Response:
        return JSONResponse({"view": self.slack.home(request.query_params.get("user", ""))})

    async def open_home(self, request: Request) -> Response:
        try:
            opened = await read_body(request, Opened)
        except BadBody as bad:
            return bad.response
        return await self._send(home_opened_body(opened.user), json_body=True)

    async def command(self, request: Request) -> Response:
        try:
            typed = await read_body(request, Typed)
        except BadBody as bad:
            return bad.response
        # As in Slack, only text that begins with "/" is a command: a space before it
        # makes a message (Slack's own advice in its refusal).
        command, _, text = typed.text.rstrip().partition(" ")
        asked = Asked(typed.channel, typed.user, thread_ts=typed.thread_ts)
        if command.startswith("/") and command != "/rl-session":
            await asyncio.to_thread(self.slack.refuse_command, asked, command)
            return JSONResponse({"ok": False, "error": "not a valid command"})
        if command != "/rl-session":
            await asyncio.to_thread(
                self.slack.add_message,
                typed.channel,
                typed.text.strip(),
                user=typed.user,
                bot_id=None,
                thread_ts=typed.thread_ts,
            )
            self.slack.changed()
            return JSONResponse({"ok": True})
        url = self.slack.new_response_url(asked)
        body = command_body(text, user=typed.user, channel=typed.channel, response_url=url)
        return await self._send(body, asked=asked)

    async def click(self, request: Request) -> Response:
        try:
            click = await read_body(request, Click)
        except BadBody as bad:
            return bad.response
        asked = None
        url = None
        if click.channel is not None:
            asked = Asked(
                click.channel,
                click.user,
                ephemeral=click.ephemeral,
                message_ts=click.message_ts,
                thread_ts=click.thread_ts,
            )
            url = self.slack.new_response_url(asked)
        return await self._send(click_body(click, response_url=url), asked=asked)

    async def dismiss(self, request: Request) -> Response:
        try:
            gone = await read_body(request, Dismiss)
        except BadBody as bad:
            return bad.response
        self.slack.dismiss(gone.id, gone.user)
        return JSONResponse({"ok": True})

    async def advance(self, request: Request) -> Response:
        wanted = (
            f"minutes: a number from 0 to {MAX_STEP_MINUTES:g}; "
            f"speed: a number above 0 and at most {MAX_SPEED:g}"
        )
        try:
            move = await read_body(request, Advance, wanted=wanted)
        except BadBody as bad:
            return bad.response
        if move.speed is not None:
            await asyncio.to_thread(self.world.set_speed, move.speed)
        if move.minutes > 0:
            await asyncio.to_thread(self.world.advance, move.minutes)
        self.slack.changed()
        return JSONResponse(self._clock())

    async def file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        upload = next((u for u in self.slack.uploads if u.file_id == file_id), None)
        if upload is None:
            return Response(status_code=404)
        return Response(upload.data, media_type="image/png")

    async def events(self, _: Request) -> Response:
        return StreamingResponse(self._stream(), media_type="text/event-stream")

    async def _stream(self) -> AsyncIterator[str]:
        seen, beat = -1, 0
        while not self.stopping.is_set():
            version = self.slack.version
            if version != seen or beat >= 10:
                seen, beat = version, 0
                yield f"data: {json.dumps({'version': version, **self._clock()})}\n\n"
            beat += 1
            await asyncio.sleep(0.1)

    def _clock(self) -> dict[str, Any]:
        return {
            "seconds": round(self.world.elapsed, 1),
            "minute": round(self.world.minute, 2),
            "speed": self.world.speed,
        }

    async def _send(
        self, body: str, *, asked: Asked | None = None, json_body: bool = False
    ) -> Response:
        """POST a signed request to the bot; an ack with a message is an ephemeral answer."""
        try:
            answer = await self.http.post(
                self.events_url,
                content=body,
                headers=signed(self.secret, body, json_body=json_body),
            )
        except httpx.HTTPError as exc:
            return JSONResponse({"ok": False, "error": type(exc).__name__}, status_code=502)
        if asked is not None and answer.content:
            try:
                acked = answer.json()
            except ValueError:
                acked = {"text": answer.text}
            if isinstance(acked, dict) and (acked.get("text") or acked.get("blocks")):
                self.slack.add_ephemeral(asked, {"text": acked.get("text", ""), **acked})
        return JSONResponse({"ok": answer.is_success, "status": answer.status_code})


def create_page_app(page: Page, *, port: int) -> Starlette:
    """The page's app, for the page at http://127.0.0.1:`port` only."""

    async def index(_: Request) -> Response:
        return FileResponse(str(STATIC / "index.html"))

    async def storage(request: Request) -> Response:
        return storage_file(page.world, request)

    async def run(_: Request) -> Response:
        return run_page(STATIC)

    async def data(request: Request) -> Response:
        return run_data(page.world, request.path_params["run"])

    routes = [
        Route("/", index),
        Route("/demo/config", page.config),
        Route("/demo/conversation", page.conversation),
        Route("/demo/home", page.home),
        Route("/demo/home/open", page.open_home, methods=["POST"]),
        Route("/demo/command", page.command, methods=["POST"]),
        Route("/demo/click", page.click, methods=["POST"]),
        Route("/demo/dismiss", page.dismiss, methods=["POST"]),
        Route("/demo/clock", page.advance, methods=["POST"]),
        Route("/demo/events", page.events),
        Route("/demo/files/{file_id}", page.file),
        Route(STORAGE_PATH + "/ckpt/{checkpoint}/{name}", storage),
        Route(RUNS_PATH + "/{run}", run),
        Route(RUNS_PATH + "/{run}/data", data),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SameOrigin, port=port)])
