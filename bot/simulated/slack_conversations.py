"""`FakeSlack`'s reading methods: `conversations.replies` and `.history` over the
stored messages (time windows, cursor pages, metadata only when asked for if
`require_include_all_metadata`), and `usergroups.users.list`."""

from __future__ import annotations

from typing import Any

from ._http import FakeHTTPServer
from .slack_calls import _TRUE

__all__ = ["SlackConversations"]


def _ts_key(ts: Any) -> float:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return 0.0


class SlackConversations(FakeHTTPServer):
    """Mixed into `FakeSlack`, which holds `messages`, `usergroups` and the flags."""

    messages: dict[str, list[dict[str, Any]]]
    usergroups: dict[str, list[str]]
    strict_threads: bool
    require_include_all_metadata: bool

    def messages_in(self, channel: str) -> list[dict[str, Any]]:
        """Stored messages of a channel (top-level and replies), oldest first."""
        with self._lock:
            return [dict(m) for m in self.messages.get(channel, [])]

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """Root (if known) plus replies, oldest first, as `conversations.replies` would list."""
        with self._lock:
            return [dict(m) for m in self._thread_messages(channel, ts)]

    def _visible(self, msg: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        out = dict(msg)
        if (
            "metadata" in out
            and self.require_include_all_metadata
            and params.get("include_all_metadata") not in _TRUE
        ):
            del out["metadata"]
        return out

    def _thread_messages(self, channel: str, ts: str) -> list[dict[str, Any]]:
        msgs = self.messages.get(channel, [])
        root = next((m for m in msgs if m["ts"] == ts), None)
        replies = [m for m in msgs if m.get("thread_ts") == ts and m["ts"] != ts]
        out: list[dict[str, Any]] = []
        if root is not None:
            root = dict(root)
            if replies:
                root["thread_ts"] = ts
                root["reply_count"] = len(replies)
                root["latest_reply"] = replies[-1]["ts"]
            out.append(root)
        out.extend(sorted(replies, key=lambda m: _ts_key(m["ts"])))
        return out

    @staticmethod
    def _page(
        items: list[dict[str, Any]], params: dict[str, Any], default_limit: int
    ) -> dict[str, Any]:
        try:
            start = int(params.get("cursor") or 0)
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        try:
            limit = int(params.get("limit") or default_limit) or default_limit
        except ValueError:
            limit = default_limit
        page = items[start : start + limit]
        more = start + limit < len(items)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        with self._lock:
            msgs = [self._visible(m, params) for m in self._thread_messages(channel, ts)]
        if not msgs and self.strict_threads:
            return {"ok": False, "error": "thread_not_found"}
        # The parent is always listed first; oldest/latest only trim the replies.
        head = [m for m in msgs[:1] if m["ts"] == ts]
        msgs = head + self._window(msgs[len(head) :], params)
        return self._page(msgs, params, 1000)

    def _m_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        with self._lock:
            msgs = [
                self._visible(m, params)
                for m in self.messages.get(channel, [])
                if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
            ]
        msgs = self._window(msgs, params)
        msgs.sort(key=lambda m: _ts_key(m["ts"]), reverse=True)
        return self._page(msgs, params, 100)

    @staticmethod
    def _window(msgs: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
        inclusive = params.get("inclusive") in _TRUE
        oldest, latest = params.get("oldest"), params.get("latest")
        out = []
        for m in msgs:
            t = _ts_key(m["ts"])
            if oldest not in (None, ""):
                o = _ts_key(oldest)
                if t < o or (t == o and not inclusive):
                    continue
            if latest not in (None, ""):
                la = _ts_key(latest)
                if t > la or (t == la and not inclusive):
                    continue
            out.append(m)
        return out

    def _m_usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        group = str(params.get("usergroup") or "")
        with self._lock:
            users = list(self.usergroups.get(group, []))
        return {"ok": True, "users": users}
