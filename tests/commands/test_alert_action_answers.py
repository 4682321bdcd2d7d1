"""What the alert buttons' workflows answer, without a process: Keep alive's
words for each way Together does not extend a resource, and which files a
Download asks for."""

from __future__ import annotations

import pytest

from bot.commands.download import ADAPTER, MERGED, variant_for
from bot.commands.keep_alive import keep_failed
from bot.simulated import make_session
from bot.together.errors import TogetherError
from bot.training.sessions import TrainingSession

SID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            TogetherError("not_found", "gone", status=404, together_message="not found"),
            "Together has no such model resource any more",
        ),
        (
            TogetherError(
                "bad_response",
                "x",
                status=400,
                together_message="model resource is not ready (status STOPPED)",
            ),
            "Together did not keep the resource up: model resource is not ready (status STOPPED).",
        ),
        (
            TogetherError("unavailable", "x", status=409, together_message="<!channel> busy"),
            "Together did not keep the resource up: &lt;!channel&gt; busy.",
        ),
        (
            TogetherError("bad_response", "x", status=400),
            "Together did not keep the resource up (HTTP 400).",
        ),
        (TogetherError("unavailable", "timed out"), "I could not tell whether Together kept"),
        (TogetherError("unavailable", "x", status=503), "I could not tell whether Together kept"),
        (TogetherError("auth", "x", status=401), "The resource was not kept up."),
    ],
)
def test_keep_alive_failures_are_told_in_togethers_words_or_plainly(
    error: TogetherError, words: str
) -> None:
    assert words in keep_failed(error)


def test_lora_sessions_download_the_adapter_others_the_merged_model() -> None:
    lora = TrainingSession.model_validate(make_session(SID, "RUNNING"))
    full = TrainingSession.model_validate(make_session(SID, "RUNNING", lora_config=None))
    assert (variant_for(lora), variant_for(full)) == (ADAPTER, MERGED)
