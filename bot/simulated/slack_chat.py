"""`FakeSlack`'s `auth.test` and `chat.*` methods: posts and updates stored per
channel (with their blocks and metadata, charts checked as Slack checks them),
ephemeral posts and permalinks."""

from __future__ import annotations

from typing import Any

from ._http import FakeHTTPServer
from .slack_calls import _TRUE, APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, _as_json_dict, _as_json_list
from .slack_charts import blocks_problems, has_chart

__all__ = ["SlackChat"]


class SlackChat(FakeHTTPServer):
    """Mixed into `FakeSlack`, which holds `messages` and the flags and gives `_next_ts`."""

    messages: dict[str, list[dict[str, Any]]]
    strict_update: bool
    refuse_charts: bool

    def _next_ts(self) -> str:
        raise NotImplementedError

    def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://example.slack.com/",
            "team": "Example",
            "user": "rl-bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    @staticmethod
    def _message_fields(params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """Validated text/blocks/metadata of a post/update, or an error name."""
        fields: dict[str, Any] = {}
        if "text" in params and params["text"] is not None:
            fields["text"] = str(params["text"])
        if params.get("blocks") not in (None, ""):
            blocks = _as_json_list(params["blocks"])
            if blocks is None:
                return {}, "invalid_blocks_format"
            fields["blocks"] = blocks
        if params.get("attachments") not in (None, ""):
            fields["attachments"] = _as_json_list(params["attachments"]) or []
        if params.get("metadata") not in (None, ""):
            metadata = _as_json_dict(params["metadata"])
            if metadata is None or not isinstance(metadata.get("event_type"), str):
                return {}, "invalid_metadata_format"
            fields["metadata"] = {
                "event_type": metadata["event_type"],
                "event_payload": metadata.get("event_payload") or {},
            }
        return fields, None

    def _chart_refusal(self, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's answer to a message whose chart it does not take (None: taken)."""
        blocks = fields.get("blocks") or []
        if not has_chart(blocks):
            return None
        if self.refuse_charts:
            problems = ["unsupported type: data_visualization"]
        else:
            problems = blocks_problems(blocks)
        if not problems:
            return None
        return {
            "ok": False,
            "error": "invalid_blocks",
            "response_metadata": {"messages": [f"[ERROR] {p}" for p in problems]},
        }

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        fields, error = self._message_fields(params)
        if error:
            return {"ok": False, "error": error}
        if refusal := self._chart_refusal(fields):
            return refusal
        if not (fields.get("text") or fields.get("blocks") or fields.get("attachments")):
            return {"ok": False, "error": "no_text"}
        msg: dict[str, Any] = {
            "type": "message",
            "ts": self._next_ts(),
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": fields.pop("text", ""),
            **fields,
        }
        thread_ts = params.get("thread_ts")
        if thread_ts not in (None, ""):
            msg["thread_ts"] = str(thread_ts)
            if params.get("reply_broadcast") in _TRUE:
                msg["subtype"] = "thread_broadcast"
        with self._lock:
            self.messages.setdefault(str(channel), []).append(msg)
        return {"ok": True, "channel": channel, "ts": msg["ts"], "message": dict(msg)}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), params.get("ts")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not ts:
            return {"ok": False, "error": "message_not_found"}
        fields, error = self._message_fields(params)
        if error:
            return {"ok": False, "error": error}
        if refusal := self._chart_refusal(fields):
            return refusal
        with self._lock:
            found = next(
                (m for m in self.messages.get(str(channel), []) if m["ts"] == str(ts)), None
            )
            if found is None and self.strict_update:
                return {"ok": False, "error": "message_not_found"}
            message = {"type": "message", "ts": str(ts), "text": "", **fields}
            if found is not None:
                found.update(fields)
                found["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
                message = dict(found)
        return {
            "ok": True,
            "channel": channel,
            "ts": str(ts),
            "text": message.get("text", ""),
            "message": message,
        }

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), str(params.get("message_ts") or "")
        if not channel or not ts:
            return {"ok": False, "error": "message_not_found"}
        return {
            "ok": True,
            "channel": channel,
            "permalink": f"https://example.slack.com/archives/{channel}/p{ts.replace('.', '')}",
        }
