"""Charts through a real `rl-bot serve` (one per backend, shared by the module):
the command and the card's button upload a PNG into the subscription's thread,
a repeated click is served from the cache, and every bad input gets a clear
answer while the text card keeps working."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import pytest

from bot.simulated.wandb import FakeRun
from tests.support import query, wait_until
from tests.support.png import png_size
from tests.support.wandb_rig import CHANNEL, fresh_rig, wandb_rig
from tests.support.wandb_rig import WandbRig as Rig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.backend_independent("gathering, drawing and uploading charts"),
]

OPS = "COPS"


def new_sid() -> str:
    """A session id of its own: the bot's chart cache outlives a test."""
    return str(uuid.uuid4())


def _rows(n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(n):
        rows.append({"_step": i, "reward": 0.1 + i / (n * 1.2), "loss": 2.0 / (1 + i / 100)})
    rows[n // 2]["loss"] = math.nan  # a gap
    rows[3]["reward"] = "warming up"  # text logged as a metric
    rows[4]["_step"] = 4.0  # a float step
    return rows


# a stall is told after 3 s (threads that do not want one say `stall=off`)
rig = wandb_rig(STALL_AFTER_MINUTES="0.05", ONCALL_CHANNEL=OPS, ONCALL_ON_METRIC="true")
fresh = fresh_rig()


def _subscribe(rig: Rig, session_id: str, options: str = "stall=off") -> str:
    token = rig.ask(f"subscribe {session_id} {options}")
    assert "Subscribed" in rig.wait_answer(token), rig.answers(token)
    return rig.root_ts(session_id)


def test_command_and_button_upload_metrics_into_the_thread_and_cache(fresh: Rig) -> None:
    rig = fresh
    sid = new_sid()
    rig.together.add(sid)
    rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_rows(1000)))
    root = _subscribe(rig, sid)

    started = time.monotonic()
    token = rig.ask(f"chart {sid}")
    [upload] = rig.wait_upload(1, root)
    took = time.monotonic() - started
    width, height = png_size(upload.data)
    assert width == 1100 and 600 <= height <= 720  # two metrics: two axes
    assert 20_000 < len(upload.data) < 400_000
    assert upload.alt_txt is not None
    assert "reward" in upload.alt_txt and "loss" in upload.alt_txt
    assert "step 0–999" in upload.alt_txt and f"grpo-{sid[:8]}" in upload.alt_txt
    assert upload.initial_comment is not None  # defused: word joiners inside "0.1"
    assert "reward 0.1 → " in upload.initial_comment.replace("\u2060", "")
    call = rig.wandb.history_calls()[-1]
    assert [s["keys"] for s in call.specs] == [["_step", "reward"], ["_step", "loss"]]
    assert "thread" in rig.wait_answer(token)
    print(f"command to upload: {took:.2f} s")

    # The card's Chart button: same session, same last step: the cache answers (the
    # card's own periodic W&B read, RunSummarySampledHistory, may come meanwhile).
    def chart_reads() -> int:
        return sum(1 for c in rig.wandb.calls if c.operation == "RunSampledHistory")

    calls = chart_reads()
    response = rig.bot.click(
        "rl_chart",
        sid,
        response_url=rig.slack.response_url("click"),
        message_ts=root,
        is_ephemeral=False,
    )
    assert response.status_code == 200
    uploads = rig.wait_upload(2, root)
    assert uploads[1].data == upload.data and chart_reads() == calls
    assert (rig.bot.metric('rlbot_charts_total{outcome="cached"}') or 0) >= 1
    assert (rig.bot.metric('rlbot_wandb_requests_total{status="200"}') or 0) >= 1

    # A metric named in the command, one never logged beside it.
    rig.ask(f"chart {sid} reward kl")
    third = rig.wait_upload(3, root)[2]
    assert third.alt_txt is not None and "kl: never logged" in third.alt_txt
    assert png_size(third.data)[1] < 450  # one axis


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ({"status": 401}, "refused the bot's API key"),
        ({"errors": ["run query failed"]}, "run query failed"),
        ({"disconnect": True}, "did not answer"),
        ({"status": 503}, "did not answer"),
    ],
)
def test_w_and_b_failing_falls_back_to_progress_with_the_reason(
    fresh: Rig, fault: dict[str, Any], words: str
) -> None:
    rig = fresh
    sid = new_sid()
    rig.together.add(sid)
    rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_rows(10)))
    rig.wandb.fail_next(**fault)
    rig.ask(f"chart {sid}")
    [upload] = rig.wait_upload(1)  # no subscription: into the channel
    assert upload.thread_ts is None
    assert upload.alt_txt is not None and words in upload.alt_txt
    assert "progress" in upload.alt_txt
    png_size(upload.data)


def test_unknown_runs_sessions_without_a_run_and_bad_names(fresh: Rig) -> None:
    rig = fresh
    sid, plain = new_sid(), new_sid()
    rig.together.add(sid)  # W&B knows neither its project nor its run
    rig.together.add(plain, metadata=None)
    rig.ask(f"chart {sid}")
    first = rig.wait_upload(1)[0]
    assert first.alt_txt is not None and "no project example-org/grpo-gsm8k" in first.alt_txt
    rig.wandb.add_run("example-org", "grpo-gsm8k", "other", FakeRun())
    rig.ask(f"chart {sid}")
    rig.wait_upload(2)
    assert "no run example-org/grpo-gsm8k/" in str(rig.slack.uploads[1].alt_txt)
    rig.ask(f"chart {plain}")
    rig.wait_upload(3)
    assert "names no W&B run" in str(rig.slack.uploads[2].alt_txt)
    ack = rig.bot.command(f"chart {sid} reward;drop", response_url=rig.slack.response_url("x"))
    assert "is not a metric name" in ack.json()["text"]  # in the ack itself


def test_upload_refused_rate_limited_or_missing_scope_and_the_card_still_works(
    fresh: Rig,
) -> None:
    rig = fresh
    plain = new_sid()
    rig.together.add(plain, metadata=None)
    rig.slack.missing_scopes.add("files:write")
    token = rig.ask(f"chart {plain}")
    assert "files:write" in rig.wait_answer(token)
    assert not rig.slack.uploads
    rig.slack.missing_scopes.clear()

    rig.slack.fail_next("files.getUploadURLExternal", status=429, retry_after=1)
    rig.ask(f"chart {plain}")
    rig.wait_upload(1)  # waited what Slack asked, then uploaded

    rig.slack.fail_next("files.completeUploadExternal", error="internal_error", times=10)
    token = rig.ask(f"chart {plain}")
    assert "Slack refused the chart upload (`internal_error`)" in rig.wait_answer(token)
    attempts = [c for c in rig.slack.calls_to("files.completeUploadExternal") if not c.ok]
    assert len(attempts) == 3  # bounded

    card = rig.ask(plain)
    wait_until(lambda: rig.slack.responses.get(card), what="the card")
    assert f"grpo-{plain[:8]}" in str(rig.slack.responses[card][0])


def test_a_stall_carries_the_progress_chart_and_an_end_the_final_chart_once(fresh: Rig) -> None:
    rig = fresh
    sid, quiet = new_sid(), new_sid()
    rig.together.add(sid, step="100")
    rig.together.add(quiet)
    rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=_rows(300)))
    root = _subscribe(rig, sid, "")  # STALL_AFTER_MINUTES: 3 s
    quiet_root = _subscribe(rig, quiet, "chart=off stall=off")

    [stall] = rig.wait_upload(1, root)
    assert stall.alt_txt is not None and "progress" in stall.alt_txt
    assert "no progress for" in stall.alt_txt and "step 100 → 100" in stall.alt_txt
    png_size(stall.data)
    wait_until(
        lambda: any(
            "no progress" in (c.text or "") for c in rig.slack.posts_in_thread(CHANNEL, root)
        ),
        what="the stall alert beside it",
    )

    rig.together.set_status(sid, "STOPPED")
    rig.together.set_status(quiet, "STOPPED")
    uploads = rig.wait_upload(2, root)
    final = uploads[1]
    assert final.alt_txt is not None and "metrics" in final.alt_txt and "reward" in final.alt_txt
    wait_until(
        lambda: (
            query(
                rig.db_url,
                "SELECT count(*) FROM outbox WHERE session_id = :s AND state = 'pending'",
                s=quiet,
            )
            == [(0,)]
            and query(rig.db_url, "SELECT active FROM subscriptions WHERE session_id = :s", s=quiet)
            in ([(False,)], [(0,)])
        ),
        what="the quiet thread told its end",
    )
    # a chart row is written with the transition that owes it: `chart=off` wrote none
    kinds = query(rig.db_url, "SELECT kind FROM outbox WHERE session_id = :s", s=quiet)
    assert ("transition",) in kinds and ("chart",) not in kinds
    assert not rig.slack.uploads_in(CHANNEL, quiet_root)
    assert len(rig.slack.uploads_in(CHANNEL, root)) == 2  # once each


def test_a_cached_chart_never_shows_another_threads_stall_band(fresh: Rig) -> None:
    """Two channels watch one session, one with the default 3 s stall threshold and
    one with `stall=off`: the stall chart drawn for the first is not the second's."""
    rig = fresh
    sid = new_sid()
    rig.together.add(sid, step="100", metadata={})  # no W&B run: the progress chart
    stalling = _subscribe(rig, sid, "chart=off")  # STALL_AFTER_MINUTES: 3 s
    quiet = rig.ask_in("C2", f"subscribe {sid} stall=off chart=off")
    assert "Subscribed" in rig.wait_answer(quiet)
    [stall] = rig.wait_upload(1, stalling)
    assert stall.alt_txt is not None and "no progress for" in stall.alt_txt

    asked = rig.ask_in("C2", f"chart {sid} progress")
    assert "thread" in rig.wait_answer(asked)
    [chart] = rig.slack.uploads_in("C2", rig.root_ts(sid, "C2"))
    assert chart.alt_txt is not None and "step 100 → 100" in chart.alt_txt
    assert "no progress for" not in chart.alt_txt, chart.alt_txt
    assert chart.data != stall.data


def test_a_metric_gone_nan_is_told_once_in_the_thread_and_on_call_and_shown_on_the_card(
    fresh: Rig,
) -> None:
    rig = fresh
    sid = new_sid()
    rows = [{"_step": i, "reward": i / 1000, "loss": 2.0 - i / 1000} for i in range(900)]
    for row in rows[812:]:
        row["loss"] = math.nan  # diverged at step 812
    rig.wandb.add_run("example-org", "grpo-gsm8k", sid[:8], FakeRun(rows=rows))
    rig.together.add(sid)
    root = _subscribe(rig, sid)

    def told(channel: str, thread: str | None) -> list[str]:
        return [
            c.text or ""
            for c in rig.slack.successful_posts(channel)
            if "`loss` became NaN at step" in (c.text or "") and c.thread_ts == thread
        ]

    [in_thread] = wait_until(lambda: told(CHANNEL, root), what="the NaN alert in the thread")
    step = int(in_thread.split("at step ")[1].split()[0].replace(",", ""))
    assert 812 <= step <= 821  # the first NaN in W&B's sample (every 9th row here)
    [page] = wait_until(lambda: told(OPS, None), what="on-call's copy")
    assert "grpo-" in page

    response = rig.bot.click(
        "rl_refresh",
        sid,
        response_url=rig.slack.response_url("refresh"),
        message_ts=root,
        is_ephemeral=False,
        message={"blocks": [{"type": "actions", "elements": [{"action_id": "rl_unsubscribe"}]}]},
    )
    assert response.status_code == 200
    card = json.dumps(rig.slack.wait_for_response("refresh"), ensure_ascii=False)
    assert "W&B: reward *0.899*" in card and "loss *NaN*" in card
    assert len(told(CHANNEL, root)) == 1
    reads = [c for c in rig.wandb.calls if c.operation == "RunSummarySampledHistory"]
    assert len(reads) == 1  # one read per WANDB_REFRESH_SECONDS (300 s)
