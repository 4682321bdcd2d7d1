"""What the fakes' server hands a route and takes back: the parsed `Request` (headers
looked up case-insensitively, the body decoded as JSON or a form) and the `Response`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

__all__ = ["Headers", "Request", "Response", "parse_body"]


class Headers(dict[str, str]):
    """A plain dict with lower-cased keys whose lookups are case-insensitive."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__()
        pairs = items.items() if hasattr(items, "items") else items
        for key, value in pairs:
            super().__setitem__(str(key).lower(), str(value))

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key.lower(), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key.lower() if isinstance(key, str) else key)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class Request:
    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: Headers
    body: bytes
    at: float

    @property
    def content_type(self) -> str:
        return str(self.headers.get("content-type", "")).split(";")[0].strip().lower()

    def params(self) -> dict[str, Any]:
        """Query string merged with a JSON-object or form-encoded body (body wins)."""
        merged: dict[str, Any] = dict(self.query)
        merged.update(parse_body(self.body, self.content_type))
        return merged


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    #: close the connection without writing any response at all
    disconnect: bool = False

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return cls(
            status=status,
            body=json.dumps(data).encode(),
            content_type="application/json; charset=utf-8",
            headers=dict(headers or {}),
        )

    @classmethod
    def text(
        cls,
        text: str,
        status: int = 200,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> Response:
        return cls(
            status=status,
            body=text.encode(),
            content_type=content_type,
            headers=dict(headers or {}),
        )


def parse_body(body: bytes, content_type: str) -> dict[str, Any]:
    """Decode a JSON object or urlencoded form; anything else yields `{}`."""
    if not body:
        return {}
    text = body.decode("utf-8", errors="replace")
    if content_type == "application/json" or (not content_type and text.lstrip()[:1] == "{"):
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {"_json": data}
    return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}
