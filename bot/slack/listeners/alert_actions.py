"""The buttons that act from an alert or a card: Acknowledge (on-call pages),
Keep alive 1 h (stall and idle-resource alerts) and Download (inference
checkpoints). Thin: each reads the click, checks its value and hands the work
to its workflow in `bot.commands`; answers go only to the clicker."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.commands.acknowledge import acknowledge as acknowledge_alert
from bot.commands.download import checkpoint_download
from bot.commands.keep_alive import keep_alive as keep_resource_alive
from bot.commands.keep_alive import keep_failed
from bot.rendering import answers
from bot.rendering.actions import (
    ACKNOWLEDGE,
    DOWNLOAD_ACTION,
    KEEP_ALIVE,
    ack_taken_words,
    read_alert_id,
    read_download_value,
)
from bot.slack.listeners.request import Request, button
from bot.together.errors import TogetherError
from bot.training.sessions import is_session_id


def register(app: AsyncApp) -> None:
    app.action(ACKNOWLEDGE)(
        button("acknowledge", acknowledge, check=ack_problem, names_session=False)
    )
    app.action(KEEP_ALIVE)(
        button("keep_alive", keep_alive, check=resource_problem, names_session=False)
    )
    app.action(DOWNLOAD_ACTION)(
        button("download", download, check=download_problem, names_session=False)
    )


def ack_problem(req: Request) -> str | None:
    if read_alert_id(req.value) is None:
        return answers.NOT_MY_ALERT
    return answers.NOWHERE if not req.channel_id or not req.user_id else None


async def acknowledge(req: Request) -> str:
    """The alert redraws itself for the one who took it; anyone else hears who has it."""
    alert_id = read_alert_id(req.value)
    assert alert_id is not None  # ack_problem refused anything else
    ack = await acknowledge_alert(
        sessionmaker=req.rt.sessionmaker,
        slack=req.slack,
        asker=req.asker,
        alert_id=alert_id,
        message_ts=req.message_ts,
        clicked=req.clicked,
    )
    if isinstance(ack, str):
        await req.say(f":no_entry_sign: {ack}")
        return "unknown"
    if ack.taken:
        return "ok"
    await req.say(ack_taken_words(ack.user_id, ack.at, yours=ack.user_id == req.user_id))
    return "taken"


def resource_problem(req: Request) -> str | None:
    if not is_session_id(req.value):  # resource ids share the session ids' alphabet
        return answers.NOT_A_RESOURCE_ID
    return answers.NOWHERE if not req.channel_id or not req.user_id else None


async def keep_alive(req: Request) -> str:
    """Slack has shown the confirm dialog; the workflow checks who clicked."""
    try:
        done = await keep_resource_alive(
            req,
            asker=req.asker,
            resource_id=req.value,
            message_ts=req.message_ts,
            clicked=req.clicked,
        )
    except TogetherError as exc:
        await req.say(keep_failed(exc))
        return exc.kind
    if done.refusal is not None:
        await req.say(f":no_entry_sign: {done.refusal}")
        return "refused"
    if not req.message_ts:  # an ephemeral alert cannot be redrawn: say it instead
        await req.say(answers.KEPT_UP)
    return "ok"


def download_problem(req: Request) -> str | None:
    if read_download_value(req.value) is None:
        return answers.NOT_MY_CHECKPOINT
    return answers.NOWHERE if not req.user_id else None


async def download(req: Request) -> str:
    """Only the clicker sees the files and their links, and only when on the Stop
    allowlist (weights are worth as much as stopping a session)."""
    ids = read_download_value(req.value)
    assert ids is not None  # download_problem refused anything else
    answer = await checkpoint_download(
        req,
        user_id=req.user_id,
        session_id=ids[0],
        checkpoint_id=ids[1],
    )
    return await req.answer_or_refuse(answer)
