"""Download on an inference checkpoint: the session is read to tell which kind
of checkpoint it is and whether it was trained with LoRA (ADAPTER files then,
else MERGED), then Together's download endpoint lists the files with presigned
URLs. The links are weights: only people on the Stop allowlist
(STOP_ALLOWED_USER_IDS, STOP_ALLOWED_USERGROUP) get them, as for Keep alive;
anyone else is told why. The answer goes only to the person who clicked; the
URLs expire and grant access, so they are never stored, logged or posted where
others see them."""

from __future__ import annotations

import logging

from bot.commands.as_poll import fetch_for_user
from bot.commands.deps import CommandDeps
from bot.commands.stop import may_stop
from bot.rendering.actions import NOT_DOWNLOADABLE, FileLink, download_answer
from bot.rendering.blocks import Message
from bot.rendering.refusals import (
    CHECKPOINT_GONE,
    UNKNOWN_CHECKPOINT,
    allowlist_refusal,
    files_refused,
)
from bot.together.errors import TogetherError
from bot.training.sessions import TrainingSession

log = logging.getLogger(__name__)

ADAPTER = "CHECKPOINT_VARIANT_ADAPTER"
MERGED = "CHECKPOINT_VARIANT_MERGED"


def variant_for(session: TrainingSession) -> str:
    """LoRA sessions' checkpoints download as the adapter, others merged."""
    return ADAPTER if session.lora_config is not None else MERGED


async def checkpoint_download(
    deps: CommandDeps, *, user_id: str, session_id: str, checkpoint_id: str
) -> Message | str:
    """The files of one inference checkpoint, as a message for the clicker; a
    string is why not (not on the allowlist, a training checkpoint, one the
    session no longer has, or Together's refusal in its own words). Raises
    TogetherError for the rest."""
    settings, together, slack = deps.settings, deps.together, deps.slack
    refusal = await may_stop(settings=settings, slack=slack, user_id=user_id)
    if refusal is not None:
        log.warning(
            "download refused",
            extra={"user_id": user_id, "session_id": session_id, "checkpoint_id": checkpoint_id},
        )
        return f":no_entry_sign: {allowlist_refusal(refusal, 'download')}"
    session = await fetch_for_user(together, session_id)
    if any(cp.id == checkpoint_id for cp in session.training_checkpoints):
        return NOT_DOWNLOADABLE
    if not any(cp.id == checkpoint_id for cp in session.inference_checkpoints):
        return UNKNOWN_CHECKPOINT
    variant = variant_for(session)
    try:
        files = await together.checkpoint_files(checkpoint_id, variant)
    except TogetherError as exc:
        if exc.kind == "not_found":
            return CHECKPOINT_GONE
        if exc.status is not None and 400 <= exc.status < 500 and exc.together_message:
            return files_refused(exc.together_message)
        raise
    # Counts only: the URLs stay out of the logs.
    log.info(
        "checkpoint download links handed out",
        extra={"session_id": session_id, "checkpoint_id": checkpoint_id, "files": len(files)},
    )
    links = [FileLink(f.filename, f.size, f.url) for f in files]
    return download_answer(checkpoint_id, variant, links)
