"""The buttons that act from an alert or a card and what they leave
(bot/rendering/actions.py), and the resource line (bot/rendering/resource_line.py):
wording, round trips of button values, escaping and Block Kit limits. Pure: no process."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from bot.rendering import card, checkpoint_message
from bot.rendering.actions import (
    ACK_NOTE,
    ACKNOWLEDGE,
    DOWNLOAD_ACTION,
    KEEP_ALIVE,
    MAX_DOWNLOADS,
    FileLink,
    ack_button,
    ack_taken_words,
    acknowledged,
    creator_dm,
    download_answer,
    keep_alive_button,
    kept_alive,
    read_alert_id,
    read_download_value,
    repage_message,
    size_words,
    with_actions,
)
from bot.rendering.blocks import MAX_ACTION_ELEMENTS, button, message_of, section_block
from bot.rendering.resource_line import RESOURCE_LINE, resource_line, with_resource_line
from bot.rendering.watch import idle_resource_alert, stalled_message
from bot.simulated.together import make_model_resource, make_session
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import TrainingSession
from bot.training.transitions import CheckpointNews
from tests.support.blocks import INJECTIONS, assert_inert, assert_valid, text_fields

SID = "123e4567-e89b-12d3-a456-426614174000"
AT = datetime(2026, 12, 2, 10, 42, tzinfo=UTC)
CLOCK = re.compile(r"<!date\^\d+\^\{time\}\|\d\d:\d\d UTC>")


def _texts(message: dict) -> str:
    return "\n".join(text_fields(message))


def _alert() -> dict:
    session = TrainingSession.model_validate(make_session(SID, "RUNNING"))
    stall = stalled_message(
        session, step=40, since=AT, stalled_for=timedelta(minutes=20), idles_out_at=None
    )
    return with_actions(stall, [ack_button(17), keep_alive_button("res-1")])


def test_acknowledge_names_its_alert_and_the_note_says_who_since_when() -> None:
    alert = _alert()
    ack = next(
        e
        for b in alert["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == ACKNOWLEDGE
    )
    assert read_alert_id(ack["value"]) == 17
    for forged in ("", "-1", "1.5", "١٢", "9" * 19, "17 "):
        assert read_alert_id(forged) is None, forged
    taken = acknowledged(alert, "UDANA", AT)
    assert_valid(taken)
    note = taken["blocks"][-1]
    assert note["block_id"] == ACK_NOTE
    text = note["elements"][0]["text"]
    assert text.startswith(":eyes: <@UDANA> is on it since ") and "10:42 UTC" in text
    assert taken["blocks"][:-1] == alert["blocks"]  # the alert itself, buttons and all, kept
    again = acknowledged(taken, "UBOB", AT + timedelta(minutes=1))
    assert len(again["blocks"]) == len(taken["blocks"])  # the note replaced, not piled up
    assert "<@UBOB>" in _texts(again) and "<@UDANA>" not in _texts(again)
    assert "<@UDANA> has this alert: on it since" in ack_taken_words("UDANA", AT, yours=False)
    assert ack_taken_words("UDANA", AT, yours=True).startswith("You took this alert at")
    assert CLOCK.search(ack_taken_words("UDANA", AT, yours=True))
    forged = acknowledged(alert, "<!channel>", AT)
    assert_inert(forged, *CLOCK.findall(_texts(forged)))


def test_keep_alive_asks_first_and_the_alert_then_shows_the_new_expiry() -> None:
    keep = keep_alive_button("res-1")
    assert keep["action_id"] == KEEP_ALIVE and keep["value"] == "res-1"
    assert keep["confirm"]["confirm"]["text"] == "Keep it up"
    resource = ModelResource.model_validate(
        make_model_resource("res-1", "READY", expires_at="2026-12-02T12:00:00Z")
    )
    kept = kept_alive(_alert(), "UDANA", resource)
    assert_valid(kept)
    note = _texts(kept)
    assert "<@UDANA> kept model resource `res-1` alive: it now stops if inactive at" in note
    assert f"<!date^{int(datetime(2026, 12, 2, 12, tzinfo=UTC).timestamp())}^" in note
    no_expiry = ModelResource.model_validate(make_model_resource("res-1", "STOPPING"))
    assert "gave no new expiry" in _texts(kept_alive(kept, "UDANA", no_expiry))


def test_inference_checkpoints_get_download_buttons_on_the_card_and_in_their_news() -> None:
    session = TrainingSession.model_validate(make_session(SID, "RUNNING", checkpoints=5))
    drawn = card(session, subscribed=True)
    assert_valid(drawn)
    downloads = [
        e
        for b in drawn["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if DOWNLOAD_ACTION.fullmatch(e["action_id"])
    ]
    assert len(downloads) == MAX_DOWNLOADS
    assert len({d["action_id"] for d in downloads}) == MAX_DOWNLOADS  # unique in a message
    newest = sorted(session.inference_checkpoints, key=lambda c: c.created_at, reverse=True)
    assert [read_download_value(d["value"]) for d in downloads] == [
        (SID, cp.id) for cp in newest[:MAX_DOWNLOADS]
    ]
    assert downloads[0]["text"]["text"] == "Download step 50"
    training = {cp.id for cp in session.training_checkpoints}
    assert not any(read_download_value(d["value"])[1] in training for d in downloads)  # type: ignore[index]
    items = [
        {"kind": "inference", "id": "ck-new", "step": 60, "event": "new"},
        {"kind": "inference", "id": "ck-reg", "step": 50, "event": "registered"},
        {"kind": "training", "id": "ck-train", "step": 60, "event": "new"},
    ]
    news = checkpoint_message(session, [CheckpointNews.model_validate(i) for i in items])
    assert_valid(news)
    values = [e["value"] for b in news["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert values == [f"{SID}/ck-new"]
    for forged in ("", SID, f"{SID}/", f"../x/{SID}", f"{SID}/a/b", f"{SID}/<!here>"):
        assert read_download_value(forged) is None, forged


def test_the_download_answer_lists_files_with_sizes_and_links_and_nothing_live() -> None:
    url = "https://storage.example/ckpt/a?X-Amz-Signature=abc&X-Amz-Expires=900"
    files = [
        FileLink("adapter_model.safetensors", 134_217_728, url),
        FileLink("adapter_config.json", "812", url + "2"),
        FileLink("<!channel>|evil", "lots", "javascript:alert(1)"),
    ]
    answer = download_answer("ck-1", "CHECKPOINT_VARIANT_ADAPTER", files)
    assert_valid(answer)
    text = _texts(answer)
    assert "LoRA adapter" in text and "3 files" in text
    assert (
        "<https://storage.example/ckpt/a?X-Amz-Signature=abc&amp;X-Amz-Expires=900|adapter_model.safetensors> · 134.2 MB"
        in text
    )
    assert "· 812 B" in text and "· lots" in text
    assert "javascript" not in text and "(no usable link)" in text
    link_free = text.replace(
        "<https://storage.example/ckpt/a?X-Amz-Signature=abc&amp;X-Amz-Expires=900|adapter_model.safetensors>",
        "",
    )
    link_free = link_free.replace(
        "<https://storage.example/ckpt/a?X-Amz-Signature=abc&amp;X-Amz-Expires=9002|adapter_config.json>",
        "",
    )
    assert "<" not in link_free.replace("&lt;", "")
    assert "merged model" in _texts(download_answer("ck-1", "CHECKPOINT_VARIANT_MERGED", []))
    assert [size_words(s) for s in (0, 999, 1000, 4_965_000_000, "12", None, -1)] == [
        "0 B",
        "999 B",
        "1.0 KB",
        "5.0 GB",
        "12 B",
        "size unknown",
        "-1",
    ]


def test_the_resource_line_says_status_gpus_replicas_expiry_and_price() -> None:
    resource = ModelResource.model_validate(
        make_model_resource(
            "res-1",
            "READY",
            expires_at="2026-12-02T12:00:00Z",
            compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 2},
        )
    )
    line = resource_line(resource, CostEstimate(currency="USD", price_per_hour=23.5))
    assert line.startswith("*Resource:* ")
    assert "B200-SXM ×3 (trainer + 2 generator replicas)" in line
    assert "stops if inactive at <!date^" in line and line.endswith("$23.50/h")
    trainer = resource.model_copy(
        update={
            "compute_config": resource.compute_config.model_copy(
                update={"num_generator_replicas": 0}
            )
        }  # type: ignore[union-attr]
    )
    assert "×1 (trainer only)" in resource_line(trainer, None)
    queued = ModelResource.model_validate(make_model_resource("res-2", "PENDING"))
    assert "queue position 3" in resource_line(queued, None)
    session = TrainingSession.model_validate(make_session(SID, "RUNNING"))
    drawn = with_resource_line(card(session), resource, None)
    assert_valid(drawn)
    kinds = [b.get("block_id") or b["type"] for b in drawn["blocks"]]
    assert kinds.index(RESOURCE_LINE) == kinds.index("actions") - 1
    assert with_resource_line(drawn, resource, None)["blocks"] == drawn["blocks"]
    for evil in INJECTIONS:
        odd = resource.model_copy(
            update={"compute_config": resource.compute_config.model_copy(update={"gpu_type": evil})}  # type: ignore[union-attr]
        )
        assert_inert(with_resource_line(card(session), odd, None))


def test_repage_dm_and_added_buttons_stay_within_slacks_limits() -> None:
    repage = repage_message(10, "training session <!here> entered Error", mention="<!subteam^S1>")
    assert_valid(repage)
    assert repage["blocks"][0]["text"]["text"].startswith(
        "<!subteam^S1> :rotating_light: *Still nobody on this after 10 min:*"
    )
    assert_inert(repage, "<!subteam^S1>")
    resource = ModelResource.model_validate(make_model_resource("res-1"))
    idle = idle_resource_alert(resource, idle_since=AT, now=AT + timedelta(hours=1))
    dm = creator_dm(idle, permalink="https://example.slack.com/archives/C1/p1")
    assert_valid(dm)
    assert dm["blocks"][0]["elements"][0]["text"].startswith(":wave: About one of your")
    assert dm["blocks"][1:] == idle["blocks"]
    full = message_of(
        "x",
        [
            section_block("x"),
            {
                "type": "actions",
                "elements": [button(str(i), f"b{i}") for i in range(MAX_ACTION_ELEMENTS)],
            },
        ],
    )
    more = with_actions(full, [ack_button(1)])
    assert_valid(more)
    assert more["blocks"][-1]["elements"][0]["action_id"] == ACKNOWLEDGE
