"""Where the demo's links lead: the simulated services hand out links to the page
itself, so nothing a newcomer clicks leaves the demo. A checkpoint's download is a
small file from the simulated storage, a W&B run a small page with its chart; a
thread's permalink opens the thread pane (`DemoSlack._m_chat_getPermalink`).
The real bot's links are whatever the real services hand out."""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from bot.demo.world import ENTITY, PROJECT, SCRIPTS, World

#: where the simulated storage's presigned download links lead (on the page)
STORAGE_PATH = "/demo/storage"
#: where the simulated W&B runs' pages are (on the page)
RUNS_PATH = "/demo/wandb"
#: points a run's chart shows, as a Slack chart block allows
_POINTS = 20


def storage_file(world: World, request: Request) -> Response:
    """A file the simulated storage holds, for a link Together's download signed:
    a signature opens the one file it was handed out for, as a presigned URL does
    (so the name in the header is always one the simulated storage gave)."""
    signature = request.query_params.get("X-Amz-Signature", "")
    checkpoint, name = request.path_params["checkpoint"], request.path_params["name"]
    if world.together.download_signed.get(signature) != (checkpoint, name):
        return Response("This link was not signed by the simulated storage.\n", status_code=403)
    body = (
        f"rl-bot demo: {name} of checkpoint {checkpoint}, from the simulated storage.\n"
        "A real checkpoint's file is gigabytes; this one only stands in for it.\n"
    )
    disposition = f'attachment; filename="{name.replace(chr(34), "")}.txt"'
    return Response(body, media_type="text/plain", headers={"Content-Disposition": disposition})


def run_page(static: Any) -> Response:
    return FileResponse(str(static / "run.html"))


def run_data(world: World, run_id: str) -> Response:
    """A simulated W&B run: its session's name and a line chart per metric, drawn on
    the page by the same Block Kit code as the cards' charts."""
    run = world.wandb.runs.get((ENTITY, PROJECT, run_id))
    script = next((s for s in SCRIPTS if s.run == run_id), None)
    if run is None or script is None:
        return JSONResponse({"error": "no such run"}, status_code=404)
    rows = list(run.rows)
    every = max(1, math.ceil(len(rows) / _POINTS))
    shown = rows[::every]
    labels = [str(row["_step"]) for row in shown]
    blocks = [
        _line(f"{metric} by step", metric, labels, [_finite(row.get(metric)) for row in shown])
        for metric in ("reward", "loss")
    ]
    return JSONResponse(
        {
            "name": script.name,
            "path": f"{ENTITY}/{PROJECT}/runs/{run_id}",
            "state": run.state,
            "steps": rows[-1]["_step"] if rows else 0,
            "blocks": blocks,
        }
    )


def _finite(value: Any) -> float | None:
    """A logged value, or None for what W&B shows as a gap (NaN, missing)."""
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _line(title: str, name: str, labels: list[str], values: list[float | None]) -> dict[str, Any]:
    return {
        "type": "data_visualization",
        "title": title,
        "chart": {
            "type": "line",
            "series": [
                {
                    "name": name,
                    "data": [{"label": x, "value": y} for x, y in zip(labels, values, strict=True)],
                }
            ],
            "axis_config": {"categories": labels, "x_label": "step", "y_label": name},
        },
    }
