"""`rl-bot demo` in a real browser: what a newcomer types and clicks, and what the
page shows back, all through the real bot over signed Slack requests."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.demo.conftest import Demo

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


def said(demo: Demo, channel: str = "CDEMO") -> str:
    """Everything in a channel, as the simulated Slack holds it."""
    answer = httpx.get(f"{demo.url}/demo/conversation?channel={channel}&user=UADA", timeout=10)
    return json.dumps(answer.json()["messages"])


@pytest.fixture
def elsewhere() -> Iterator[str]:
    """Another origin on this machine: a blank page on a port of its own."""

    class Blank(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>another site</title>")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Blank)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_bot_welcomes_and_a_mistyped_command_is_refused_like_slack(
    page: Page, demo: Demo
) -> None:
    welcome = channel_article(page, "Welcome to the rl-bot demo")
    welcome.wait_for()
    assert "ppo-math-lr3e-5" in welcome.inner_text() and "Try" in welcome.inner_text()
    ask(page, "/rl-sesion ls")
    refusal = channel_article(page, "is not a valid command")
    refusal.wait_for()
    assert "/rl-sesion is not a valid command" in refusal.inner_text()
    assert "Only visible to you" in refusal.inner_text()
    assert "Slackbot" in refusal.inner_text()
    assert "/rl-sesion ls" not in said(demo)  # never posted as chat
    # Slack's own advice works: a space before the "/" makes it a message
    ask(page, " /rl-sesion ls, with a space before it")
    channel_article(page, "with a space before it").wait_for()
    assert "/rl-sesion ls, with a space before it" in said(demo)


def test_a_session_is_asked_for_by_its_name(page: Page, demo: Demo) -> None:
    """docs/demo.md introduces the sessions by name: typed as they are, each is its
    card in the channel, with the id `ls` would have given."""
    ask(page, "/rl-session dpo-helpful-v2")
    card = (
        page.locator("#messages")
        .get_by_role("article")
        .filter(has=page.get_by_role("heading", name="dpo-helpful-v2"))
        .last
    )
    card.wait_for()
    assert "No session named" not in page.locator("#messages").inner_text()
    assert re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", card.inner_text()), card.inner_text()
    assert "dpo-helpful-v2" in said(demo)  # the card, posted in the channel


def test_ls_all_lists_the_sessions_only_to_whoever_asked(page: Page) -> None:
    answer = listed(page)
    for name in ("grpo-gsm8k-main", "ppo-math-lr3e-5", "dpo-helpful-v2", "grpo-code-r1"):
        assert name in answer.inner_text()
    assert "Only visible to you" in answer.inner_text()
    act_as(page, "gus (guest, not on the Stop allowlist)")
    assert "All sessions" not in page.locator("#messages").inner_text()


def test_subscribe_posts_the_root_card_and_a_status_change_redraws_it_in_place(
    page: Page,
) -> None:
    root = subscribe(page, "grpo-gsm8k-main")
    before = root.inner_text()
    node = root.element_handle()
    chart_button = root.get_by_role("button", name="Chart", exact=True).element_handle()
    for _ in range(3):  # the story's next status change is at most a minute away
        page.get_by_role("button", name="+1 min").click()
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
    # redrawn in place: the card and its buttons are the nodes they were
    assert node.evaluate("n => n.isConnected") and chart_button.evaluate("n => n.isConnected")
    assert not re.search(r"\(edited\)\d", root.inner_text())


def test_an_error_pages_oncall(page: Page) -> None:
    page.get_by_role("button", name="+1 min").click()
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


@pytest.mark.long("waits for the first W&B read and a redraw of the card")
def test_the_live_chart_is_drawn_and_every_link_stays_in_the_demo(page: Page) -> None:
    """View thread on the on-call page opens the thread pane; the root card there
    draws its chart block; W&B run opens the simulated run's page; Download serves a
    file of the simulated storage; Chart uploads a picture into the thread."""
    page.get_by_role("button", name="+1 min").click()  # its loss is NaN from minute 1
    card = subscribe(page, "grpo-code-r1")
    page.get_by_role("button", name="# oncall").click()
    paged = page.locator("#messages").get_by_role("article").filter(has_text="became NaN")
    view_thread = paged.get_by_role("link", name="View thread").first
    # the run was read (every few seconds; slower on a loaded machine): the card's next
    # redraw has its chart
    view_thread.wait_for(timeout=90_000)
    view_thread.click()
    thread = page.get_by_role("complementary", name="Thread")
    root = thread.get_by_role("article").filter(
        has=page.get_by_role("heading", name="grpo-code-r1")
    )
    root.first.wait_for()
    assert page.get_by_role("heading", level=1).inner_text() == "#rl-demo"
    chart = card.get_by_role("img", name="reward by step")
    for _ in range(6):  # the story moves on; Refresh has the bot poll now, and redraw
        page.get_by_role("button", name="+1 min").click()
        card.get_by_role("button", name="Refresh", exact=True).click()
        try:
            chart.wait_for(timeout=10_000)
            break
        except Exception:
            continue
    chart.wait_for(timeout=1_000)
    assert chart.locator("polyline").count() >= 1
    assert chart.locator("circle").count() >= 2
    with page.context.expect_page() as opened:
        root.first.get_by_role("button", name="W&B run", exact=True).click()
    run = opened.value
    run.get_by_role("img", name="loss by step").wait_for()
    assert "grpo-code-r1" in run.get_by_role("heading").first.inner_text()
    run.close()
    root.first.get_by_role("button", name=re.compile(r"^Download step")).first.click()
    link = thread.get_by_role("article").filter(has_text="Checkpoint").get_by_role("link").first
    link.wait_for()
    got = httpx.get(str(link.get_attribute("href")), timeout=10)
    assert got.status_code == 200 and "simulated storage" in got.text
    root.first.get_by_role("button", name="Chart", exact=True).click()
    thread.locator("img[src^='/demo/files/']").first.wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#thread img')].some(i => i.naturalWidth > 200)"
    )


def test_every_kind_of_chart_block_is_drawn(page: Page) -> None:
    axis = {"categories": ["a", "b", "c"], "x_label": "x", "y_label": "y"}
    series = [
        {
            "name": "one",
            "data": [{"label": c, "value": v} for c, v in zip("abc", (1, -2, 3), strict=True)],
        },
        {
            "name": "two",
            "data": [{"label": c, "value": v} for c, v in zip("abc", (2, 2, 0), strict=True)],
        },
    ]
    blocks = [
        {
            "type": "data_visualization",
            "title": kind,
            "chart": {"type": kind, "series": series, "axis_config": axis},
        }
        for kind in ("line", "bar", "area")
    ]
    segments = [{"label": "x", "value": 1}, {"label": "y", "value": 3}, {"label": "z", "value": 4}]
    blocks.append(
        {
            "type": "data_visualization",
            "title": "pie",
            "chart": {"type": "pie", "segments": segments},
        }
    )
    drawn = page.evaluate(
        """async (blocks) => {
            const { renderBlocks } = await import("/static/blockkit.js");
            const root = renderBlocks(blocks, () => {});
            document.body.append(root);
            const svg = (t) => root.querySelector(`svg[aria-label="${t}"]`);
            return {
                line: svg("line").querySelectorAll("polyline").length,
                bars: svg("bar").querySelectorAll("rect.bar").length,
                areas: svg("area").querySelectorAll("polygon").length,
                slices: svg("pie").querySelectorAll(".slice").length,
                legend: root.querySelector(".bk-chart:last-child .bk-chart-legend").innerText,
            };
        }""",
        blocks,
    )
    assert drawn["line"] == 2 and drawn["bars"] == 6 and drawn["areas"] == 2
    assert drawn["slices"] == 3 and "50%" in drawn["legend"]


def test_a_cross_origin_post_is_refused(page: Page, demo: Demo, elsewhere: str) -> None:
    """Another site in the same browser: a `text/plain` no-cors POST (which needs no
    permission) and a JSON one (which asks first) change nothing."""
    page.goto(elsewhere)
    body = json.dumps({"user": "UADA", "channel": "CDEMO", "text": "typed by another site"})
    outcomes = page.evaluate(
        """async ([url, body]) => {
            const out = [];
            for (const [mode, type] of [["no-cors", "text/plain"], ["cors", "application/json"]]) {
                try {
                    const r = await fetch(`${url}/demo/command`,
                        { method: "POST", mode, headers: { "Content-Type": type }, body });
                    out.push(r.type === "opaque" ? "opaque" : String(r.status));
                } catch (e) {
                    out.push("refused");
                }
            }
            return out;
        }""",
        [demo.url, body],
    )
    assert outcomes == ["opaque", "refused"]
    assert "typed by another site" not in said(demo)
