"""Charts drawn from plain data: valid PNGs of the expected size class, NaN and
infinite points as gaps, and words that name every series (pure, no process)."""

from __future__ import annotations

import math
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from bot.rendering.charts.draw import render_png
from bot.rendering.charts.metrics import metrics_chart
from bot.rendering.charts.progress import progress_chart
from bot.rendering.charts.spec import ChartSpec, Line, Panel
from bot.rendering.charts.words import chart_words, describe, number
from bot.rendering.text import WORD_JOINER
from tests.support.png import png_size

T0 = datetime(2026, 12, 1, 10, 0)
#: matplotlib builds its font cache with `fc-list` on its first import in a fresh
#: environment: the tests that draw are marked as starting a process
draws = pytest.mark.slow


def _points(n: int, *, flat_after: int | None = None) -> list[tuple[datetime, int]]:
    out = []
    for i in range(n):
        step = i * 5 if flat_after is None or i < flat_after else flat_after * 5
        out.append((T0 + timedelta(minutes=i), step))
    if flat_after is not None:  # only moves are stored
        out = out[: flat_after + 1]
    return out


@draws
def test_progress_chart_with_a_stall_band() -> None:
    points = _points(60, flat_after=40)
    spec = progress_chart(
        "demo-run", points, now=T0 + timedelta(minutes=70), stall_after=timedelta(minutes=15)
    )
    assert spec.bands and "no progress for 30 min (threshold 15 min)" in spec.bands[0].label
    step_line = spec.panels[0].lines[0]
    assert step_line.y[-1] == step_line.y[-2] == 200.0  # carried flat to now
    width, height = png_size(render_png(spec))
    assert width == 1100 and 600 <= height <= 720  # two panels
    words = describe(spec)
    assert "demo-run" in words and "step 0 → 200" in words and "no progress" in words


@draws
def test_metrics_chart_one_axis_per_metric_with_gaps() -> None:
    steps = tuple(float(s) for s in range(1000))
    reward = tuple(math.sin(s / 50) for s in steps)
    loss = tuple(
        math.nan if 400 <= s < 420 else (math.inf if s == 500 else 1 / (s + 1)) for s in steps
    )
    spec = metrics_chart("demo-run", [Line("reward", steps, reward), Line("loss", steps, loss)])
    assert [p.ylabel for p in spec.panels] == ["reward", "loss"]
    data = render_png(spec)  # how long it takes is the bench's (`python -m bench --only chart`)
    width, height = png_size(data)
    assert width == 1100 and 600 <= height <= 720
    assert 20_000 < len(data) < 400_000
    words = describe(spec)
    assert "reward 0 → " in words and "loss 1 → 0.001" in words and "step 0–999" in words


@draws
def test_one_panel_and_an_empty_chart_still_draw() -> None:
    one = metrics_chart("r", [Line("reward", (1.0, 2.0), (0.5, 0.7))])
    assert png_size(render_png(one))[1] < 450
    empty = progress_chart("r", [], now=T0)
    assert empty.empty and png_size(render_png(empty))[0] == 1100
    assert "never logged" in describe(metrics_chart("r", []), missing=("kl",))


@draws
def test_names_are_drawn_as_typed_never_as_mathtext() -> None:
    """A session's name and W&B's metric names are anyone's text: `$\\foo$` or deep
    braces would make matplotlib's math parser refuse the whole chart."""
    odd = "$\\foo$ " + "{" * 200 + "$x^{" + "}" * 3
    steps = (1.0, 2.0, 3.0)
    metrics = metrics_chart(odd, [Line("$\\sqrt{$", steps, (0.1, 0.2, 0.3))], note=odd)
    assert png_size(render_png(metrics))[0] == 1100
    progress = progress_chart(
        odd,
        _points(30, flat_after=10),
        now=T0 + timedelta(minutes=60),
        stall_after=timedelta(minutes=5),
    )
    assert png_size(render_png(progress))[0] == 1100
    two = ChartSpec(
        odd, "step", (Panel("$y$", (Line("$a$", steps, steps), Line("b$", steps, steps))),)
    )
    assert png_size(render_png(two))[0] == 1100  # a legend of two odd labels too


def test_the_message_beside_a_chart_is_defused_like_every_text_from_together() -> None:
    """Slack links bare URLs and domains and expands @-names in a file's comment: a
    session named so must neither link nor ping, and the alt text stays plain."""
    name = "@channel see evil.example https://evil.example/x #general <!here>"
    spec = metrics_chart(name, [Line("reward", (1.0, 2.0), (0.5, 0.7))])
    text, alt = chart_words(spec, note="W&B run example-org/proj.v2 is gone")
    assert text.startswith(":bar_chart: ")
    assert "@channel" not in text and f"@{WORD_JOINER}channel" in text
    assert "evil.example" not in text and f"evil.{WORD_JOINER}example" in text
    assert "https://" not in text and f"https:{WORD_JOINER}//" in text
    assert "#general" not in text and "<!here>" not in text and "&lt;!here&gt;" in text
    assert "proj.v2" not in text
    assert WORD_JOINER not in alt and name in alt and "proj.v2" in alt


def test_numbers_in_words() -> None:
    assert number(math.nan) == "NaN" and number(-math.inf) == "-∞"
    assert number(12345.0) == "12,345" and number(0.123456) == "0.123"


@draws
def test_matplotlib_is_not_imported_until_the_first_chart() -> None:
    code = (
        "import sys, bot.rendering.charts.draw, bot.rendering.charts.progress, bot.runtime;"
        "assert 'matplotlib' not in sys.modules, 'imported early';"
        "from bot.rendering.charts.draw import render_png; from bot.rendering.charts.metrics import metrics_chart;"
        "from bot.rendering.charts.spec import Line;"
        "render_png(metrics_chart('r', [Line('a', (1.0,), (2.0,))]));"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot';"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
