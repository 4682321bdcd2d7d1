from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bot.ops.logs import QUIET_LOGGERS, REDACTED, configure_logging
from bot.ops.metrics import Metrics, get_metrics, status_code_label
from bot.simulated import FakeSlack, FakeTogether
from bot.training.status import Status, status_of
from tests.support import BotProcess, wait_until

SECRET = "xoxb-1234567890-SECRET"
OTHER = 'sk-"quoted\\tog"'  # needs JSON escaping
SHORT = "abc"  # below the minimum length: never redacted


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {n: logging.getLogger(n).level for n in QUIET_LOGGERS}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)
    for name, lvl in quiet.items():
        logging.getLogger(name).setLevel(lvl)
    logging.captureWarnings(False)


def _json_logging(level: str = "DEBUG") -> io.StringIO:
    buf = io.StringIO()
    configure_logging(level, "json", [SECRET, OTHER, SHORT, ""], stream=buf)
    return buf


def _lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_json_lines_parse_and_carry_fields() -> None:
    buf = _json_logging()
    log = logging.getLogger("rlbot.test")
    log.info("hello %s", "world", extra={"request_id": "r1", "session_id": "s1"})
    log.warning("second", extra={"channel_id": "C1", "team_id": "T1", "outbox_id": 7})
    first, second = _lines(buf)
    assert first["msg"] == "hello world"
    assert first["level"] == "INFO"
    assert first["logger"] == "rlbot.test"
    assert first["request_id"] == "r1" and first["session_id"] == "s1"
    assert first["ts"].endswith("Z") and "T" in first["ts"]
    assert second["outbox_id"] == 7 and second["channel_id"] == "C1"
    assert "exc" not in first


def test_secret_in_fstring_message_is_redacted() -> None:
    buf = _json_logging()
    logging.getLogger("rlbot.test").info(f"token is {SECRET} ok")
    out = buf.getvalue()
    assert SECRET not in out
    assert _lines(buf)[0]["msg"] == f"token is {REDACTED} ok"


def test_secret_in_args_is_redacted() -> None:
    buf = _json_logging()
    logging.getLogger("rlbot.test").info("headers=%r key=%s", {"auth": SECRET}, OTHER)
    out = buf.getvalue()
    assert SECRET not in out and OTHER not in out
    assert "quoted" not in out
    msg = _lines(buf)[0]["msg"]
    assert msg.count(REDACTED) == 2


def test_secret_in_extra_is_redacted() -> None:
    buf = _json_logging()
    logging.getLogger("rlbot.test").info(
        "call", extra={"token": SECRET, "nested": {"k": [OTHER]}, "channel_id": "C1"}
    )
    out = buf.getvalue()
    assert SECRET not in out and "quoted" not in out
    line = _lines(buf)[0]
    assert line["token"] == REDACTED
    assert line["channel_id"] == "C1"


def test_secret_in_exception_is_redacted() -> None:
    buf = _json_logging()
    try:
        raise RuntimeError(f"auth failed for {SECRET}")
    except RuntimeError:
        logging.getLogger("rlbot.test").exception("boom", extra={"outbox_id": 3})
    out = buf.getvalue()
    assert SECRET not in out
    line = _lines(buf)[0]
    assert line["msg"] == "boom"
    assert "RuntimeError: auth failed for " + REDACTED in line["exc"]
    assert "Traceback" in line["exc"]


def test_short_secrets_are_not_redacted() -> None:
    buf = _json_logging()
    logging.getLogger("rlbot.test").info("abc is fine")
    assert _lines(buf)[0]["msg"] == "abc is fine"


def test_console_format_redacts_too() -> None:
    buf = io.StringIO()
    configure_logging("INFO", "console", [SECRET], stream=buf)
    try:
        raise ValueError(SECRET)
    except ValueError:
        logging.getLogger("rlbot.test").error("x %s", SECRET, exc_info=True, extra={"t": SECRET})
    out = buf.getvalue()
    assert SECRET not in out
    assert "rlbot.test" in out and "ValueError" in out and "t=" + REDACTED in out


def test_configure_is_idempotent_and_sets_levels() -> None:
    root = logging.getLogger()
    before = len(root.handlers)
    _json_logging("INFO")
    buf = _json_logging("warning")
    assert len(root.handlers) == before + 1
    log = logging.getLogger("rlbot.test")
    log.info("dropped")
    log.warning("kept")
    assert [line["msg"] for line in _lines(buf)] == ["kept"]
    assert logging.getLogger("httpx").level == logging.WARNING
    assert logging.getLogger("apscheduler.executors").level == logging.WARNING


def test_slack_sdk_never_logs_below_info_even_at_debug() -> None:
    """slack_sdk's DEBUG lines carry whole answers (presigned download links) and
    the response_url a person's answer goes to."""
    buf = _json_logging("DEBUG")
    presigned = "https://files.example/adapter.safetensors?X-Amz-Signature=0123abcd"
    logging.getLogger("slack_sdk.web.async_base_client").debug("Received: %s", presigned)
    logging.getLogger("slack_sdk.webhook.async_client").debug("Sending to %s", presigned)
    logging.getLogger("slack_sdk.web.async_base_client").info("kept at info")
    logging.getLogger("rlbot.test").debug("our own debug line")
    said = buf.getvalue()
    assert "X-Amz-Signature" not in said
    assert [line["msg"] for line in _lines(buf)] == ["kept at info", "our own debug line"]

    quiet = _json_logging("ERROR")  # a quieter LOG_LEVEL is not raised back to INFO
    logging.getLogger("slack_sdk.web.async_base_client").warning("dropped at ERROR")
    assert _lines(quiet) == []


def test_unknown_level_falls_back_to_info() -> None:
    buf = _json_logging("LOUD")
    assert logging.getLogger().level == logging.INFO
    assert "unknown LOG_LEVEL" in buf.getvalue()


def _sample(m: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    value = m.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


def test_metrics_render_names_and_content_type() -> None:
    m = Metrics()
    body, ctype = m.render()
    text = body.decode()
    assert ctype.startswith("text/plain")
    for name in (
        "rlbot_commands_total",
        "rlbot_ack_seconds",
        "rlbot_together_requests_total",
        "rlbot_together_request_seconds",
        "rlbot_poll_cycle_seconds",
        "rlbot_poll_sessions_total",
        "rlbot_outbox_depth",
        "rlbot_delivery_attempts_total",
        "rlbot_subscriptions_active",
        "rlbot_oncall_alerts_total",
        "rlbot_transitions_total",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    # Delivery outcomes are pre-created at zero.
    assert 'rlbot_delivery_attempts_total{outcome="duplicate_skipped"} 0.0' in text
    # Nothing leaks into the global registry.
    from prometheus_client import REGISTRY

    assert REGISTRY.get_sample_value("rlbot_poll_sessions_total") is None


def test_metrics_move() -> None:
    m = Metrics()
    m.commands.labels(verb="subscribe", outcome="ok").inc()
    m.commands.labels(verb="subscribe", outcome="ok").inc()
    m.together_requests.labels(status="200").inc()
    m.together_requests.labels(status="timeout").inc()
    m.delivery_attempts.labels(outcome="sent").inc(3)
    m.poll_sessions.inc(5)
    m.oncall_alerts.inc()
    m.transitions.labels(to_status="COMPLETED").inc()
    m.outbox_depth.set(4)
    m.subscriptions_active.set(2)
    m.ack_seconds.observe(0.012)
    m.together_request_seconds.observe(0.3)
    m.poll_cycle_seconds.observe(1.5)

    assert _sample(m, "rlbot_commands_total", {"verb": "subscribe", "outcome": "ok"}) == 2
    assert _sample(m, "rlbot_together_requests_total", {"status": "timeout"}) == 1
    assert _sample(m, "rlbot_delivery_attempts_total", {"outcome": "sent"}) == 3
    assert _sample(m, "rlbot_delivery_attempts_total", {"outcome": "dead"}) == 0
    assert _sample(m, "rlbot_poll_sessions_total") == 5
    assert _sample(m, "rlbot_oncall_alerts_total") == 1
    assert _sample(m, "rlbot_transitions_total", {"to_status": "COMPLETED"}) == 1
    assert _sample(m, "rlbot_outbox_depth") == 4
    assert _sample(m, "rlbot_subscriptions_active") == 2
    assert _sample(m, "rlbot_ack_seconds_count") == 1
    assert _sample(m, "rlbot_ack_seconds_bucket", {"le": "0.025"}) == 1
    assert _sample(m, "rlbot_ack_seconds_bucket", {"le": "0.01"}) == 0
    assert _sample(m, "rlbot_poll_cycle_seconds_sum") == 1.5

    text = m.render()[0].decode()
    assert 'rlbot_commands_total{outcome="ok",verb="subscribe"} 2.0' in text
    # Independent instances do not share state.
    assert _sample(Metrics(), "rlbot_poll_sessions_total") == 0


def test_get_metrics_is_a_lazy_singleton() -> None:
    import bot.ops.metrics as mod

    assert get_metrics() is get_metrics()
    assert isinstance(mod._instance, Metrics)


# --- labels fed from outside data -------------------------------------------------------------

ODD_STATUSES = ["PAUSED", "TRAINING_SESSION_STATUS_WEIRD", "x" * 200, "running ", "é", ""]


def test_transition_labels_are_the_known_statuses() -> None:
    for status in Status:
        assert status_of(status.value).value == status.value
        assert status_of(f"TRAINING_SESSION_STATUS_{status.value}") is status
    for odd in ODD_STATUSES:
        assert status_of(odd).value in {"UNKNOWN", "UNSPECIFIED"}, odd


def test_together_status_labels_are_known_codes_or_a_class() -> None:
    assert [status_code_label(x) for x in ("200", "404", "429", "503", "418")] == [
        "200",
        "404",
        "429",
        "503",
        "418",
    ]
    assert [status_code_label(x) for x in ("299", "599", "999", "100")] == [
        "2xx",
        "5xx",
        "9xx",
        "100",
    ]
    for word in ("timeout", "error", "too_large"):  # the client's own
        assert status_code_label(word) == word
    # However many odd codes come, the labels stay few.
    assert len({status_code_label(str(code)) for code in range(100, 1000)}) < 80


@pytest.mark.backend_independent("metric labels")
def test_odd_upstream_values_do_not_become_metric_labels(
    bot: BotProcess, slack: FakeSlack, together: FakeTogether
) -> None:
    sid, broken = "123e4567-e89b-12d3-a456-426614174000", "broken-599-1"
    together.add(sid)
    bot.command(f"subscribe {sid}", response_url=slack.response_url("sub"))
    slack.wait_for_response("sub")
    odd = ["WEIRD_ONE", "WEIRD_TWO", "x" * 300]
    for status in odd:
        counted = sum(_samples(bot, "rlbot_transitions_total").values())
        together.set_status(sid, status)
        wait_until(
            lambda c=counted: sum(_samples(bot, "rlbot_transitions_total").values()) > c,
            what=f"the transition to {status[:20]} counted",
        )
    together.fail(broken, status=599)
    bot.command(broken, response_url=slack.response_url("broken"))
    slack.wait_for_response("broken", timeout=15)

    transitions = _samples(bot, "rlbot_transitions_total")
    assert set(transitions) <= {f'{{to_status="{s.value}"}}' for s in Status}, transitions
    assert transitions['{to_status="UNKNOWN"}'] == len(odd)
    requests = _samples(bot, "rlbot_together_requests_total")
    assert '{status="599"}' not in requests and requests['{status="5xx"}'] >= 1, requests


def _samples(bot: BotProcess, name: str) -> dict[str, float]:
    """A metric's samples on the bot's /metrics, by their labels as written."""
    body = httpx.get(f"{bot.url}/metrics", timeout=5).text
    found: dict[str, float] = {}
    for line in body.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(name + "{"):
            found[head.removeprefix(name)] = float(value)
    return found
