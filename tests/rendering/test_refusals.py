"""Refusals and failures in words: which sentence for which case, and Together's
own words made inert wherever they are repeated."""

from __future__ import annotations

import pytest

from bot.rendering.follow import followed, gone_reason, unfollowed
from bot.rendering.refusals import (
    SLACK_CHANNEL_PROBLEMS,
    AllowlistRefusal,
    allowlist_refusal,
    keep_refused,
    refused_words,
    slack_refusal,
    stop_not_sent,
    stop_unknown,
    unlisted_creator,
    unmapped_answer,
    upload_refused,
)
from bot.rendering.rules import rules_removed
from bot.rendering.thread_options import option_words, routing_words


def test_each_guarded_action_is_refused_in_its_own_words_but_an_unreadable_group_is_one() -> None:
    for refusal in (AllowlistRefusal.NOT_ALLOWED, AllowlistRefusal.NOT_CONFIGURED):
        said = {allowlist_refusal(refusal, g) for g in ("stop", "download", "keep alive")}
        assert len(said) == 3
    assert "download checkpoint weights" in allowlist_refusal(
        AllowlistRefusal.NOT_ALLOWED, "download"
    )
    unreadable = {
        allowlist_refusal(AllowlistRefusal.GROUP_UNREADABLE, g)
        for g in ("stop", "download", "keep alive")
    }
    assert unreadable == {"I could not check the allowed user group just now; try again shortly."}


@pytest.mark.parametrize(
    ("kind", "resource_words"),
    [
        ("not_found", "Together has no such model resource."),
        ("invalid_id", "That is not a model resource id."),
    ],
)
def test_a_resource_stop_rewords_what_together_says_of_sessions(
    kind: str, resource_words: str
) -> None:
    why = "Together's words for a session."
    assert stop_not_sent("session", kind, why) == f":warning: The session was not stopped. {why}"
    assert stop_not_sent("model resource", kind, why) == (
        f":warning: The model resource was not stopped. {resource_words}"
    )
    assert stop_not_sent("model resource", "auth", why).endswith(why)


def test_a_refusal_repeats_together_inert_or_names_the_status() -> None:
    said = refused_words("session", "<!channel> is busy", 409)
    assert "<!channel>" not in said
    assert said.startswith("Together did not stop the session: ")
    assert refused_words("session", None, 409) == (
        "Together did not stop the session and gave no reason (HTTP 409)."
    )
    # only a resource is told that an active session may hold it up
    assert refused_words("model resource", None, 409).endswith("stop that session first.")
    assert "<!channel>" not in keep_refused("<!channel>", 400)
    assert keep_refused(None, 400).endswith("(HTTP 400).")


def test_a_stop_that_may_have_happened_says_how_to_find_out() -> None:
    timed_out = stop_unknown("session", "ft-1", None)
    assert "no answer came back in time" in timed_out
    assert "`/rl-session ft-1`" in timed_out
    server = stop_unknown("model resource", "mr-1", 503)
    assert "server error (HTTP 503)" in server
    assert server.endswith("Try again shortly to find out.")


def test_slack_refusals_name_the_code_when_no_sentence_fits() -> None:
    for code, words in SLACK_CHANNEL_PROBLEMS.items():
        assert slack_refusal(code) == words
    assert slack_refusal("fatal_error") == "Slack refused the message (`fatal_error`)."
    assert slack_refusal("") == "Slack refused the message (`error`)."
    assert "Invite me" in upload_refused("not_in_channel")
    assert upload_refused("x" * 100).count("x") == 60


def test_an_unmapped_user_is_you_to_the_caller_and_a_mention_to_others() -> None:
    assert "I do not know your Together user," in unmapped_answer("U1", caller="U1")
    assert "the Together user of <@U2>," in unmapped_answer("U2", caller="U1")
    # what to hand the operator: the member id, and where the Together id is seen
    assert "Slack member ID `U2`" in unmapped_answer("U2", caller="U1")
    assert "*Created by*" in unmapped_answer("U2", caller="U1")
    assert "your Together user," in unlisted_creator("U1", mine=True)
    assert "of <@U2>," in unlisted_creator("U2", mine=False)


def test_follow_answers_count_and_name_whose_sessions() -> None:
    assert followed("all", caller="U1", model=None) == "every session the bot can see"
    assert followed("U1", caller="U1", model="m") == "your sessions of `m`"
    assert followed("U2", caller="U1", model=None) == "<@U2>'s sessions"
    assert unfollowed("your sessions", 0).startswith("This channel has no rule following")
    assert "Removed the rule following" in unfollowed("your sessions", 1)
    assert "Removed the 3 rules following" in unfollowed("your sessions", 3)
    assert gone_reason("not_in_channel") == "I was removed from the channel."
    assert rules_removed(1).endswith("1 rule.")
    assert rules_removed(0).endswith("0 rules.")


def test_option_words_only_for_what_was_given() -> None:
    assert option_words(stall_minutes=None, target_step=None, chart_on_end=None) == ""
    assert option_words(stall_minutes=0, target_step=2000, chart_on_end=False) == (
        ", stall alerts off, target step 2,000 (the card shows an ETA), no final chart"
    )
    assert routing_words(broadcast=None, dm="", creator="u", creator_slack_user=None) == (
        ", no DMs to the creator"
    )
    unmapped = routing_words(broadcast="ends", dm="creator", creator="", creator_slack_user=None)
    assert unmapped.startswith(", the session's end (and errors) also shown in the channel, ")
    assert "`(unknown)`" in unmapped
    mapped = routing_words(broadcast=None, dm="creator", creator="u", creator_slack_user="U0123ABC")
    assert mapped == ", DMs to the creator <@U0123ABC> when it errors, stalls or idles"


def test_every_channel_slack_refuses_us_has_words_for_the_person() -> None:
    """The codes the Slack adapter classes as "cannot post here" and the codes the
    answer words are one set: a new code on either side needs the other."""
    from bot.rendering.refusals import SLACK_CHANNEL_PROBLEMS
    from bot.slack_web.refusals import CANNOT_POST

    assert set(SLACK_CHANNEL_PROBLEMS) == CANNOT_POST


def test_a_subscribe_answer_says_what_changed_or_that_nothing_did() -> None:
    from bot.rendering.answers import subscribed

    sid = "123e4567-e89b-12d3-a456-426614174000"
    new = subscribed(sid, "status", already=False, changed=False)
    assert new.startswith(":white_check_mark: Subscribed (status)") and "thread" in new
    same = subscribed(sid, "status", already=True, changed=False)
    assert "already subscribed" in same and "Filters" not in same
    changed = subscribed(sid, "errors-only", already=True, changed=True)
    assert "are now: errors-only" in changed and "already" not in changed
