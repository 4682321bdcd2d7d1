"""Who may use the demo's page: only a browser showing the page itself.

The page's API types commands and presses buttons as the demo's people, so a
request must name the page's own Host (a DNS-rebinding page names its own), and a
POST must carry the page's own Origin (a browser always sends it on a POST, and a
cross-site page cannot forge it) and a JSON body (a cross-site form or a
`text/plain` fetch cannot send one without asking first, and the page never
answers that ask). Anything else is refused with a 4xx before any handler runs,
so it changes nothing. Anyone who can reach the port with those headers can still
use the demo: it listens on loopback only.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

_SAFE_METHODS = frozenset({"GET", "HEAD"})


class SameOrigin:
    """ASGI middleware: refuse every request not from the page at `port` on loopback."""

    def __init__(self, app: ASGIApp, *, port: int) -> None:
        self.app = app
        self.hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, reason = refusal
        body = json.dumps({"ok": False, "error": reason}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, reason) of a request the page must not serve; None to serve it."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return 403, "this page answers only at its own address on 127.0.0.1"
        if scope["method"] in _SAFE_METHODS:
            return None
        if headers.get("origin", "").lower() != f"http://{host}":
            return 403, "only the demo's own page may send this"
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return 415, "the body must be JSON (Content-Type: application/json)"
        return None
