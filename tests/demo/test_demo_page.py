"""`rl-bot demo` in a real browser: what a newcomer types and clicks, and what the
page shows back, all through the real bot over signed Slack requests."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.slow

Page = Any  # playwright's Page: imported only with the browser


def ask(page: Page, text: str) -> None:
    box = page.get_by_role("textbox", name="Message #rl-demo")
    box.fill(text)
    box.press("Enter")


def channel_article(page: Page, text: str) -> Any:
    """The newest message in the channel with that text (earlier tests leave theirs)."""
    return page.locator("#messages").get_by_role("article").filter(has_text=text).last


def listed(page: Page) -> Any:
    """`ls all`, and the answer it gets once it has drawn."""
    before = page.locator("#messages article").filter(has_text="All sessions").count()
    ask(page, "/rl-session ls all")
    page.wait_for_function(
        "n => [...document.querySelectorAll('#messages article')]"
        ".filter(a => a.innerText.includes('All sessions')).length > n",
        arg=before,
    )
    return channel_article(page, "All sessions")


def act_as(page: Page, person: str) -> None:
    """Switch person, and wait for the channel as they see it: an answer drawn for the
    one before (their ephemeral messages) must not be counted as theirs."""
    [chosen] = page.get_by_label("Acting as").select_option(label=person)
    page.locator(f"#messages[data-viewer='{chosen}']").wait_for(state="attached")


def row(answer: Any, name: str) -> int:
    """The row number `ls` gave a session (its buttons are "Subscribe <n>", "Stop <n>")."""
    found = re.search(rf"^(\d+)\..*{re.escape(name)}", answer.inner_text(), re.MULTILINE)
    assert found, f"{name} not listed:\n{answer.inner_text()}"
    return int(found.group(1))


def subscribe(page: Page, name: str) -> Any:
    """`ls all`, then Subscribe on that session's row; the root card that it posts."""
    answer = listed(page)
    number = row(answer, name)
    answer.get_by_role("button", name=f"Subscribe {number}", exact=True).click()
    root = (
        page.locator("#messages")
        .get_by_role("article")
        .filter(has=page.get_by_role("heading", name=name))
        .filter(has_not_text="Only visible to you")
        .last
    )
    root.wait_for()
    return root


def open_thread(root: Any) -> Any:
    root.get_by_role("button", name=re.compile(r"^\d+ repl(y|ies)$")).click()
    return root.page.get_by_role("complementary", name="Thread")


def test_ls_all_lists_the_sessions_only_to_whoever_asked(page: Page) -> None:
    answer = listed(page)
    for name in ("grpo-gsm8k-main", "ppo-math-lr3e-5", "dpo-helpful-v2", "grpo-code-r1"):
        assert name in answer.inner_text()
    assert "Only visible to you" in answer.inner_text()
    act_as(page, "gus (guest, not on the Stop allowlist)")
    assert "All sessions" not in page.locator("#messages").inner_text()


def test_subscribe_posts_the_root_card_and_a_status_change_redraws_it(page: Page) -> None:
    root = subscribe(page, "grpo-gsm8k-main")
    before = root.inner_text()
    for _ in range(3):  # the story's next status change is at most 30 minutes away
        page.get_by_role("button", name="+10 min").click()
        try:
            root.get_by_role("button", name=re.compile(r"^\d+ repl(y|ies)$")).wait_for(
                timeout=15_000
            )
            break
        except Exception:
            continue
    thread = open_thread(root)
    reply = thread.get_by_role("article").nth(1)
    reply.wait_for()
    status = "Running" if "Creating" in before else "Stopped"
    thread.get_by_role("article").filter(has_text=status).last.wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#messages article')].some(a =>"
        " a.innerText.includes('grpo-gsm8k-main') && a.innerText.includes('(edited)')"
        " && !a.innerText.includes('Only visible to you'))"
    )
    assert root.inner_text() != before


def test_an_error_pages_oncall(page: Page) -> None:
    page.get_by_role("button", name="+10 min").click()
    page.get_by_role("button", name="# oncall").click()
    page.get_by_role("textbox", name="Message #oncall").wait_for()
    alert = page.locator("#messages").get_by_role("article").filter(has_text="ppo-math-lr3e-5")
    alert.first.get_by_role("button", name="Acknowledge").wait_for()
    assert "Error" in alert.first.inner_text()


def test_the_guest_is_refused_stop(page: Page) -> None:
    act_as(page, "gus (guest, not on the Stop allowlist)")
    answer = listed(page)
    stop = f"Stop {row(answer, 'dpo-helpful-v2')}"
    answer.get_by_role("button", name=stop, exact=True).click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "Stop this training session?" in dialog.inner_text()
    dialog.get_by_role("button", name="Stop it", exact=True).click()
    refusal = channel_article(page, "not allowed to stop")
    refusal.wait_for()
    assert "Only visible to you" in refusal.inner_text()


def test_chart_uploads_a_picture_into_the_thread(page: Page) -> None:
    root = subscribe(page, "grpo-code-r1")
    root.get_by_role("button", name="Chart", exact=True).click()
    root.get_by_role("button", name=re.compile(r"^\d+ repl(y|ies)$")).wait_for()
    thread = open_thread(root)
    thread.locator("img[src^='/demo/files/']").first.wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#thread img')].some(i => i.naturalWidth > 200)"
    )
