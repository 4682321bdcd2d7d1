"""The demo's Slack workspace: its people and channels, and the simulated Slack with
what a Slack client shows besides stored messages (ephemeral answers, App Home views).

Everything the bot sends still goes through the simulated Slack's Web API and
response_url endpoints; this adds only the bookkeeping a browser needs to draw it.
"""

from __future__ import annotations

import itertools
import json
import secrets
from dataclasses import dataclass
from typing import Any

from bot.demo.welcome import welcome_message
from bot.simulated._http import Request, Response
from bot.simulated.slack import BOT_USER_ID, FakeSlack

TEAM_ID = "T1"
DEMO_CHANNEL, ONCALL_CHANNEL = "CDEMO", "CONCALL"
YOU, ONCALL, GUEST = "UADA", "UBEN", "UGUEST"
#: who tells a person that a command does not exist, as in Slack
SLACKBOT = "USLACKBOT"


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    role: str


PEOPLE = (
    Person(YOU, "ada", "you: owns most sessions, may stop them"),
    Person(ONCALL, "ben", "on-call engineer, on the Stop allowlist"),
    Person(GUEST, "gus", "guest, not on the Stop allowlist"),
)
CHANNELS = {DEMO_CHANNEL: "rl-demo", ONCALL_CHANNEL: "oncall"}
NAMES = {p.id: p.name for p in PEOPLE} | {BOT_USER_ID: "rl-bot", SLACKBOT: "Slackbot"}


@dataclass
class Ephemeral:
    """An answer only one person sees, until they dismiss it or it is replaced."""

    id: str
    channel: str
    user: str
    ts: str
    message: dict[str, Any]
    thread_ts: str | None = None


@dataclass(frozen=True)
class Asked:
    """Where a response_url leads: who asked, in which channel, from which message."""

    channel: str
    user: str
    ephemeral: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None


class DemoSlack(FakeSlack):
    """The simulated Slack, plus ephemeral answers, App Home views and a change counter."""

    def __init__(self, *, page_url: str = "http://127.0.0.1", bot_token: str | None = None) -> None:
        """`bot_token`: the only token the Web API takes (any, when None)."""
        super().__init__(valid_tokens={bot_token} if bot_token else None)
        self.page_url = page_url
        self.version = 0
        self.ephemerals: list[Ephemeral] = []
        self._asked: dict[str, Asked] = {}
        self._homes: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def welcome(self) -> None:
        """The bot's first message in #rl-demo: what the next minutes bring, what to try."""
        text, blocks = welcome_message(ONCALL_CHANNEL)
        self.add_message(DEMO_CHANNEL, text, blocks=blocks)

    # -- what the page asks -----------------------------------------------------------------

    def refuse_command(self, asked: Asked, command: str) -> None:
        """Slack's answer to a slash command no app has: only the person sees it, and
        nothing is posted."""
        text = (
            f"`{command}` is not a valid command. In Slack, all messages that start with the "
            '"/" character are interpreted as commands. If you are trying to send a message '
            'that starts with a "/" character, try adding a space before it.'
        )
        self.add_ephemeral(asked, {"text": text, "user": SLACKBOT})

    def new_response_url(self, asked: Asked) -> str:
        token = secrets.token_hex(16)  # anyone who could guess it could answer as the bot
        with self._lock:
            self._asked[token] = asked
        return self.response_url(token)

    def add_ephemeral(self, asked: Asked, message: dict[str, Any]) -> None:
        with self._lock:
            self.ephemerals.append(
                Ephemeral(
                    id=f"e{next(self._ids)}",
                    channel=asked.channel,
                    user=asked.user,
                    ts=self._next_ts(),
                    message=message,
                    thread_ts=asked.thread_ts,
                )
            )
        self.changed()

    def dismiss(self, ephemeral_id: str, user: str) -> None:
        with self._lock:
            self.ephemerals = [
                e for e in self.ephemerals if not (e.id == ephemeral_id and e.user == user)
            ]
        self.changed()

    def home(self, user: str) -> dict[str, Any] | None:
        with self._lock:
            return self._homes.get(user)

    def conversation(self, channel: str, viewer: str) -> list[dict[str, Any]]:
        """Every message of a channel (replies too) as `viewer` sees it, oldest first."""
        with self._lock:
            stored = [dict(m) for m in self.messages.get(channel, [])]
            mine = [
                {
                    **e.message,
                    "ts": e.ts,
                    "ephemeral": e.id,
                    **({"thread_ts": e.thread_ts} if e.thread_ts else {}),
                }
                for e in self.ephemerals
                if e.channel == channel and e.user == viewer
            ]
        return sorted(stored + mine, key=lambda m: float(m["ts"]))

    def changed(self) -> None:
        """Something a page may show changed: pages compare `version` with what they drew."""
        with self._lock:
            self.version += 1

    # -- the Web API and response_url, with the page's bookkeeping ---------------------------

    def _handle(self, request: Request) -> Response:
        try:
            return super()._handle(request)
        finally:
            self.changed()

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = super()._m_chat_postEphemeral(params)
        if answer.get("ok"):
            thread = params.get("thread_ts")
            asked = Asked(str(params["channel"]), str(params["user"]), thread_ts=thread or None)
            self.add_ephemeral(asked, _message(params))
        return answer

    def _m_chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        """A permalink that opens the thread in the page (Slack's own leads to Slack)."""
        answer = super()._m_chat_getPermalink(params)
        if answer.get("ok"):
            ts = str(params.get("message_ts") or "")
            answer["permalink"] = f"{self.page_url}/#thread/{answer['channel']}/{ts}"
        return answer

    def _m_views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        user = str(params.get("user_id") or "")
        if not user or not isinstance(view, dict):
            return {"ok": False, "error": "invalid_arguments"}
        with self._lock:
            self._homes[user] = view
        return {"ok": True, "view": {"id": f"V{user}", "type": "home", **view}}

    def _handle_response_url(self, request: Request) -> Response:
        answer = super()._handle_response_url(request)
        token = request.path[len("/response/") :]
        with self._lock:
            asked = self._asked.get(token)
        if answer.status == 200 and asked is not None:
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                body = {}
            if isinstance(body, dict):
                self._answer(asked, body)
        return answer

    def _answer(self, asked: Asked, body: dict[str, Any]) -> None:
        """What Slack does with a response_url POST: delete, replace, post or whisper."""
        message = _message(body)
        with self._lock:
            original = next((e for e in self.ephemerals if e.id == asked.ephemeral), None)
            stored = next(
                (
                    m
                    for m in self.messages.get(asked.channel, [])
                    if asked.ephemeral is None and m["ts"] == asked.message_ts
                ),
                None,
            )
            if body.get("delete_original") and original is not None:
                self.ephemerals.remove(original)
                return
            if body.get("delete_original") and stored is not None:
                self.messages[asked.channel].remove(stored)
                return
            if body.get("replace_original") and original is not None:
                original.message = message
                return
            if body.get("replace_original") and stored is not None:
                stored.update(text=message["text"], blocks=message.get("blocks", []))
                stored["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
                return
        if body.get("response_type") == "in_channel":
            self.add_message(
                asked.channel,
                message.get("text", ""),
                thread_ts=asked.thread_ts,
                blocks=message.get("blocks"),
            )
        else:
            self.add_ephemeral(asked, message)


def _message(params: dict[str, Any]) -> dict[str, Any]:
    """Text and blocks of a post, whichever form (JSON string or list) they came in."""
    blocks = params.get("blocks")
    if isinstance(blocks, str) and blocks:
        blocks = json.loads(blocks)
    out: dict[str, Any] = {"text": str(params.get("text") or ""), "user": BOT_USER_ID}
    if isinstance(blocks, list):
        out["blocks"] = blocks
    return out
