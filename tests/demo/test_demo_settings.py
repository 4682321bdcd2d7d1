"""The demo's settings point only at its own simulated services, whatever the
environment says; and a demo left running does not keep every request. Fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.demo.run import KEPT_REQUESTS, Demo
from bot.demo.workspace import Asked
from tests.demo.conftest import REAL_LOOKING
from tests.support import free_tcp_port


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[Demo]:
    for name, value in REAL_LOOKING.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_API_KEY", "real-looking-wandb-key")
    demo = Demo.start(speed=1.0, port=free_tcp_port())
    try:
        yield demo
    finally:
        demo.stop()


def test_every_secret_and_service_url_is_the_demos_own(started: Demo) -> None:
    settings = started.settings
    assert settings.slack_api_url == started.slack.api_url
    assert settings.together_base_url == started.together.base_url
    assert settings.wandb_base_url == started.wandb.url
    assert settings.database_url.startswith("sqlite:///")
    secrets = set(settings.secrets())
    assert not secrets & set(REAL_LOOKING.values())
    assert settings.together_api_key is not None
    assert settings.together_api_key.get_secret_value() == started.together.api_key
    assert settings.wandb_key == started.wandb.api_key
    assert settings.oncall_channel == "CONCALL"
    assert "UGUEST" not in settings.stop_allowed_user_ids
    assert settings.problems_for("serve") == []


def test_a_long_running_demo_forgets_old_requests(started: Demo) -> None:
    started.together.requests.extend([None] * (KEPT_REQUESTS + 50))  # type: ignore[list-item]
    started.slack.calls.extend([None] * (KEPT_REQUESTS + 50))  # type: ignore[list-item]
    started.forget_old_requests()
    assert len(started.together.requests) == KEPT_REQUESTS
    assert len(started.slack.calls) == KEPT_REQUESTS


def test_no_other_setting_of_the_environment_reaches_the_demo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A container's environment (docker-compose's `env_file: .env`) holds the
    operator's settings: the demo takes none of them, and one the bot would refuse
    does not stop it with a traceback."""
    tuned = {"SPEND_WATCH": "false", "TOGETHER_REQUESTS_PER_MINUTE": "1", "POLL_PLAN": "get"}
    for name, value in {**tuned, "PORT": "not-a-port", "LOG_FORMAT": "xml"}.items():
        monkeypatch.setenv(name, value)
    demo = Demo.start(speed=1.0, port=free_tcp_port())
    try:
        settings = demo.settings
        assert settings.spend_watch is True
        assert settings.together_requests_per_minute == 120
        assert settings.poll_plan == "auto"
        assert settings.port == 3000
    finally:
        demo.stop()


def test_the_simulated_services_take_only_the_demos_own_random_keys(started: Demo) -> None:
    """The simulated Slack, Together and W&B listen on loopback ports of their own,
    where a cross-site form (a POST needs no preflight), a DNS-rebinding page or
    another local user can reach them. Keys written in the source, or none at all,
    let such a page post into #rl-demo as the bot or stop a session; and a
    response_url numbered 1, 2, 3… could be guessed and answered."""
    import httpx

    settings = started.settings
    post = f"{started.slack.api_url}chat.postMessage"
    message = {"channel": "CDEMO", "text": "posted from another page"}
    for token in (None, "xoxb-demo-token"):
        form = message | ({"token": token} if token else {})
        answer = httpx.post(post, data=form, timeout=10).json()
        assert answer == {"ok": False, "error": "invalid_auth"}, (token, answer)
    assert settings.slack_bot_token is not None
    own = {"token": settings.slack_bot_token.get_secret_value()}
    assert httpx.post(post, data=message | own, timeout=10).json()["ok"] is True
    listed = httpx.get(
        f"{started.together.base_url}/rl/training-sessions",
        headers={"Authorization": "Bearer demo-together-key"},
        timeout=10,
    )
    assert listed.status_code == 401
    assert started.wandb.api_key != "demo-wandb-key"
    asked = Asked("CDEMO", "UADA")
    first, second = started.slack.new_response_url(asked), started.slack.new_response_url(asked)
    assert (
        len(first.rsplit("/", 1)[1]) >= 32 and first.rsplit("/", 1)[1] != second.rsplit("/", 1)[1]
    )
