"""An answer that is not Slack's (HTTP 200 with an HTML page, or a body cut off
mid-JSON: a proxy or a load balancer in an incident) is as passing as a 503:
delivery retries the row, backing off, up to DELIVERY_MAX_ATTEMPTS, and neither
sets it aside after the few tries of an unknown refusal nor trips over the SDK's
odd exception. Slack's own SDK calls a local server that answers so."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.delivery.outcome import MAX_OTHER_ATTEMPTS, classify
from bot.outbox.contract.payloads import Kind
from bot.outbox.contract.rows import State
from bot.outbox.table import OutboxMessage
from bot.slack_web import RefusalKind, refusal_of
from bot.subscriptions.errors import slack_problem

ANSWERS = {
    "html": ("text/html", b"<html><body>502 Bad Gateway</body></html>"),
    "cut_json": ("application/json", b'{"ok": tr'),
}


class _Answers(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        content_type, body = ANSWERS[self.path.rsplit("/", 2)[-2]]
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    httpd = HTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()


def _refusal(server: HTTPServer, answer: str) -> SlackApiError:
    async def call() -> None:
        client = AsyncWebClient(
            token="xoxb-test", base_url=f"http://127.0.0.1:{server.server_port}/{answer}/"
        )
        await client.chat_postMessage(channel="C1", text="hi")

    with pytest.raises(SlackApiError) as caught:
        asyncio.run(call())
    return caught.value


@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_an_unreadable_200_is_passing(server: HTTPServer, answer: str) -> None:
    exc = _refusal(server, answer)
    refusal = refusal_of(exc)
    assert refusal.kind is RefusalKind.SERVER and refusal.passing
    assert refusal.error == "http_200"
    row = OutboxMessage(id=7, kind=Kind.TRANSITION, channel_id="C1", attempts=MAX_OTHER_ATTEMPTS)
    outcome = classify(row, exc, {})
    assert outcome.state is State.PENDING and not outcome.tell_operators


def test_a_subscribe_refused_with_a_cut_answer_is_worded_not_raised(server: HTTPServer) -> None:
    worded = slack_problem(_refusal(server, "cut_json"))
    assert isinstance(worded, str) and worded.strip()
