"""Listener packages; each exposes `register(app)`."""

from slack_bolt.async_app import AsyncApp

from bot.slack.listeners import actions, alert_actions, commands, home, named


def register(app: AsyncApp) -> None:
    commands.register(app)
    actions.register(app)
    alert_actions.register(app)
    home.register(app)
    named.register(app)
