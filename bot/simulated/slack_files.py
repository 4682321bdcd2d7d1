"""Slack's file upload flow for `FakeSlack`: `files.getUploadURLExternal`, the
upload URL, and `files.completeUploadExternal` (what slack_sdk's
`files_upload_v2` calls), recording which thread received which bytes.

Like Slack: step 1 needs `filename` and `length` and the `files:write` scope
(`missing_scopes`), the upload URL takes the bytes as the body (or a `file` form
field) and must get exactly `length` bytes, and step 3 shares only files that
were uploaded, into `channel_id` (and `thread_ts`), with `initial_comment`.
The shared file appears as a message in the channel (or the thread).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ._http import Request, Response

__all__ = ["SlackFiles", "Upload"]


@dataclass
class Upload:
    """One file shared by `files.completeUploadExternal`."""

    file_id: str
    channel: str
    thread_ts: str | None
    data: bytes
    filename: str
    title: str | None
    alt_txt: str | None
    initial_comment: str | None
    ts: str
    #: when it was shared (time.monotonic(), in this process)
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Pending:
    filename: str
    length: int
    alt_txt: str | None
    data: bytes | None = None


class SlackFiles:
    """Mixed into `FakeSlack`: it provides `_lock`, `_cond`, `messages`, `url`,
    `_next_ts` and `_take_fault`."""

    _lock: threading.RLock
    _cond: threading.Condition
    messages: dict[str, list[dict[str, Any]]]
    url: str

    def _next_ts(self) -> str:
        raise NotImplementedError

    def _take_fault(self, *keys: str, params: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def _init_files(self) -> None:
        #: scopes the token lacks, e.g. {"files:write"}
        self.missing_scopes: set[str] = set()
        self.uploads: list[Upload] = []
        self.upload_posts = 0
        self._pending: dict[str, _Pending] = {}
        self._file_counter = 0

    def uploads_in(self, channel: str, thread_ts: str | None = None) -> list[Upload]:
        with self._lock:
            return [
                u
                for u in self.uploads
                if u.channel == channel and (thread_ts is None or u.thread_ts == thread_ts)
            ]

    # -- step 1 -----------------------------------------------------------------------------

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        if "files:write" in self.missing_scopes:
            return {
                "ok": False,
                "error": "missing_scope",
                "needed": "files:write",
                "provided": "chat:write,commands",
            }
        filename = params.get("filename")
        try:
            length = int(params.get("length", ""))
        except (TypeError, ValueError):
            length = 0
        if not filename or length <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        with self._lock:
            self._file_counter += 1
            file_id = f"F{self._file_counter:08d}"
            alt = params.get("alt_txt")
            self._pending[file_id] = _Pending(str(filename), length, alt if alt else None)
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    # -- step 2 -----------------------------------------------------------------------------

    def _handle_upload(self, request: Request) -> Response:
        file_id = request.path[len("/upload/") :]
        fault = self._take_fault("upload")
        if fault is not None:
            return Response.text(fault.error or "error", status=fault.status or 500)
        data = request.body
        if request.content_type == "multipart/form-data":
            data = _multipart_file(request.body)
        with self._cond:
            self.upload_posts += 1
            pending = self._pending.get(file_id)
            if pending is None:
                return Response.text("invalid upload url", status=404)
            if len(data) != pending.length:
                return Response.text("length mismatch", status=400)
            pending.data = data
            self._cond.notify_all()
        return Response.text(f"OK - {len(data)}")

    # -- step 3 -----------------------------------------------------------------------------

    def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            files = json.loads(params.get("files") or "")
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        if not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        channel = params.get("channel_id")
        thread_ts = params.get("thread_ts") or None
        comment = params.get("initial_comment") or None
        shared = []
        with self._cond:
            for item in files:
                pending = self._pending.get(str(item.get("id")))
                if pending is None or pending.data is None:
                    return {"ok": False, "error": "file_not_found"}
            if (
                channel
                and thread_ts is not None
                and not any(m.get("ts") == thread_ts for m in self.messages.get(str(channel), []))
            ):
                return {"ok": False, "error": "invalid_thread_ts"}
            for item in files:
                file_id = str(item["id"])
                pending = self._pending.pop(file_id)
                assert pending.data is not None
                info = {
                    "id": file_id,
                    "name": pending.filename,
                    "title": item.get("title") or pending.filename,
                    "mimetype": "image/png" if pending.data[:4] == b"\x89PNG" else "",
                    "size": pending.length,
                }
                shared.append(info)
                if channel:
                    ts = self._next_ts()
                    message: dict[str, Any] = {
                        "type": "message",
                        "ts": ts,
                        "text": comment or "",
                        "files": [info],
                        "upload": True,
                    }
                    if thread_ts is not None:
                        message["thread_ts"] = str(thread_ts)
                    self.messages.setdefault(str(channel), []).append(message)
                    self.uploads.append(
                        Upload(
                            file_id,
                            str(channel),
                            str(thread_ts) if thread_ts else None,
                            pending.data,
                            pending.filename,
                            item.get("title"),
                            pending.alt_txt,
                            comment,
                            ts,
                        )
                    )
            self._cond.notify_all()
        return {"ok": True, "files": shared}


def _multipart_file(body: bytes) -> bytes:
    """The `file` field of a multipart body (slack_sdk may send either form)."""
    head, _, rest = body.partition(b"\r\n\r\n")
    boundary = head.split(b"\r\n", 1)[0]
    return rest.rsplit(b"\r\n" + boundary, 1)[0]
