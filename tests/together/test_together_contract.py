"""Contract: every kind of answer the Together-shaped fake gives is one the real
client accepts, checked with Together's own SDK models (`together` 3.1.1).

Answers are fetched over HTTP and validated from their JSON bytes with
`model_validate_json(..., strict=True)` (strict JSON mode: no number-to-string
or string-to-bool coercion; RFC 3339 strings for datetimes). The SDK's models
allow unknown keys, so drift into a misspelt or invented key is caught by
`extras`, and a field the fake never sends by `FieldCoverage`. The negative
tests prove the check fails on drifted answers. Fast: no bot process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import together
from pydantic import ValidationError
from together.types.post_training import (
    InferenceCheckpoint,
    LoraConfig,
    ModelRegistryArtifact,
    ModelResources,
    ModelResourcesEstimateCostResponse,
    ModelResourcesListResponse,
    Session,
    SessionError,
    SessionsListResponse,
    TrainingCheckpoint,
    WandbMetadata,
)
from together.types.post_training.inference_checkpoint import Registration
from together.types.post_training.model_resources import ComputeConfig, StatusDetails
from together.types.post_training.session import PolicyState
from together.types.post_training.sessions_list_response import Meta

from bot.simulated import FakeTogether
from bot.simulated.together import (
    DEFAULT_PRICES,
    RESOURCE_STATUSES,
    SESSION_ERROR_CODES,
    make_old_shape_session,
    make_session,
)
from tests.support.together_contract import KEY, ErrorBody, FieldCoverage, fetch, strict

STATUSES = ["UNSPECIFIED", "CREATING", "RUNNING", "STOPPING", "STOPPED", "ERROR", "EXPIRED"]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTogether]:
    with FakeTogether(KEY) as server:
        yield server


@pytest.fixture(scope="module")
def coverage() -> FieldCoverage:
    return FieldCoverage()


@pytest.fixture(autouse=True)
def _fresh(fake: FakeTogether) -> None:
    with fake._lock:
        fake.sessions.clear()
        fake.resources.clear()
    fake.clear_faults()


def get_session(
    fake: FakeTogether, coverage: FieldCoverage, sid: str, status: str = "RUNNING", **over: Any
) -> Session:
    fake.add(sid, status, **over)
    response = fetch(fake, f"/rl/training-sessions/{sid}")
    assert response.status_code == 200
    session = strict(Session, response, coverage)
    assert session.id == sid
    return session


# --- sessions --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", STATUSES)
def test_session_in_each_status(fake: FakeTogether, coverage: FieldCoverage, status: str) -> None:
    session = get_session(fake, coverage, f"s-{status.lower()}", status)
    assert session.status == f"TRAINING_SESSION_STATUS_{status}"
    assert (session.error is not None) == (status == "ERROR")


@pytest.mark.parametrize("code", SESSION_ERROR_CODES)
def test_session_error_with_each_code(
    fake: FakeTogether, coverage: FieldCoverage, code: str
) -> None:
    error = {"code": code, "message": "it broke", "occurred_at": "2026-01-02T00:00:05Z"}
    session = get_session(fake, coverage, "s-err", "ERROR", error=error)
    assert session.error is not None and session.error.code == code


def test_session_after_set_status_error_and_stop(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    get_session(fake, coverage, "s-live", "RUNNING")
    fake.set_status("s-live", "ERROR")
    session = strict(Session, fetch(fake, "/rl/training-sessions/s-live"), coverage)
    assert session.error is not None and session.error.code in SESSION_ERROR_CODES

    fake.add("s-stop", "RUNNING")
    stopped = fetch(fake, "/rl/training-sessions/s-stop/stop", method="POST")
    assert stopped.status_code == 200
    assert strict(Session, stopped, coverage).status == "TRAINING_SESSION_STATUS_STOPPING"


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"checkpoints": 0}, id="no-checkpoints"),
        pytest.param({"checkpoints": 3}, id="three-of-each"),
        pytest.param(
            {
                "inference_checkpoints": [
                    {"id": "i-unreg", "created_at": "2026-01-02T00:00:00Z", "step": "5"},
                    {
                        "id": "i-model",
                        "created_at": "2026-01-02T00:00:00Z",
                        "step": 6,
                        "registration": {"model": {"id": "ml_a", "revision_id": "rv_a"}},
                    },
                    {
                        "id": "i-adapter",
                        "created_at": "2026-01-02T00:00:00Z",
                        "step": "7",
                        "registration": {"adapter": {"id": "ml_b", "revision_id": "rv_b"}},
                    },
                ],
                "training_checkpoints": [
                    {"id": "t-unreg", "created_at": "2026-01-02T00:00:00Z", "step": "5"}
                ],
            },
            id="registrations-partial",
        ),
        pytest.param({"resume_from_checkpoint_id": "ckpt-123"}, id="resumed"),
        pytest.param({"drop": ["lora_config"]}, id="full-weights-no-lora"),
        pytest.param(
            {"lora_config": {"rank": 8, "alpha": 16, "dropout": 0, "seed": 7}}, id="lora-int-seed"
        ),
        pytest.param(
            {
                "policy_state": {
                    "applied_weights_version": "40",
                    "target_weights_version": 42,
                    "trainer_step": "42",
                    "pending_publish": True,
                }
            },
            id="policy-publish-pending",
        ),
        pytest.param(
            {"metadata": {"wandb": {"entity": "org", "project": "p", "run_id": "r1"}}},
            id="wandb-without-url",
        ),
        pytest.param({"metadata": {}}, id="no-wandb"),
        pytest.param({"drop": ["display_name"]}, id="no-display-name"),
        pytest.param({"step": "12345678901234567"}, id="int64-step-as-string"),
        pytest.param({"step": 7}, id="step-as-number"),
        pytest.param({"type": "TRAINING_SESSION_TYPE_TRAINER_ONLY"}, id="session-type"),
    ],
)
def test_session_variants(
    fake: FakeTogether, coverage: FieldCoverage, over: dict[str, Any]
) -> None:
    session = get_session(fake, coverage, "s-variant", "RUNNING", **over)
    if "step" in over:
        assert session.step == over["step"]  # the SDK keeps it exactly as sent


def test_an_overflowing_number_is_sent_as_1e999_and_the_sdk_reads_it(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    lora = {"rank": 8, "alpha": 16, "dropout": float("inf"), "seed": "7"}
    fake.add("s-huge", lora_config=lora)
    for path in ("/rl/training-sessions/s-huge", "/rl/training-sessions?limit=5"):
        response = fetch(fake, path)
        assert b"Infinity" not in response.content and b'"dropout": 1e999' in response.content
    session = strict(Session, fetch(fake, "/rl/training-sessions/s-huge"), coverage)
    assert session.lora_config is not None and session.lora_config.dropout == float("inf")
    listed = strict(SessionsListResponse, fetch(fake, "/rl/training-sessions?limit=5"))
    assert [s.id for s in listed.data] == ["s-huge"]


def test_every_declared_field_is_sent_somewhere(fake: FakeTogether) -> None:
    """Field for field, including those the bot does not use yet."""
    seen = FieldCoverage()
    ids = ["c-err", "c-resume", "c-int-seed"]
    fake.add(ids[0], "ERROR")
    fake.add(ids[1], resume_from_checkpoint_id="ckpt-1")
    fake.add(ids[2], lora_config={"rank": 8, "alpha": 16, "dropout": 0.1, "seed": 7})
    for sid in ids:
        seen.add(strict(Session, fetch(fake, f"/rl/training-sessions/{sid}")))
    fake.add_resource("r-pending", "PENDING")
    fake.add_resource("r-error", "ERROR")
    fake.add_resource("r-ready", "READY", base_weights_ref="ml_base@rv_1")
    seen.add(strict(ModelResourcesListResponse, fetch(fake, "/rl/model-resources")))
    seen.add(strict(SessionsListResponse, fetch(fake, "/rl/training-sessions?limit=1")))
    seen.add(
        strict(
            ModelResourcesEstimateCostResponse,
            fetch(
                fake, "/rl/model-resources/estimate-cost", method="POST", json=_resource_body(fake)
            ),
        )
    )
    for cls in (
        Session,
        PolicyState,
        SessionError,
        LoraConfig,
        WandbMetadata,
        TrainingCheckpoint,
        InferenceCheckpoint,
        Registration,
        ModelRegistryArtifact,
        ModelResources,
        ComputeConfig,
        StatusDetails,
        SessionsListResponse,
        ModelResourcesListResponse,
        ModelResourcesEstimateCostResponse,
    ):
        assert seen.missing(cls) == set(), cls.__name__


# --- lists ---------------------------------------------------------------------------------


def test_list_pages_follow_meta_cursor(fake: FakeTogether, coverage: FieldCoverage) -> None:
    for i in range(7):
        fake.add(f"l-{i}", "ERROR" if i % 2 else "RUNNING")
    ids: list[str] = []
    cursor = ""
    pages = 0
    while True:
        params = {"limit": 3, **({"after": cursor} if cursor else {})}
        page = strict(
            SessionsListResponse, fetch(fake, "/rl/training-sessions", params=params), coverage
        )
        pages += 1
        assert page.data is not None and page.meta is not None
        assert page.meta.limit == 3
        ids += [s.id for s in page.data]
        if not page.meta.has_more:
            assert page.meta.next_cursor == ""  # empty when has_more is false
            break
        assert page.meta.next_cursor == page.data[-1].id
        cursor = page.meta.next_cursor
    assert pages == 3 and ids == [f"l-{i}" for i in range(7)]


def test_short_pages_hold_at_most_page_rows_in_the_sdks_shape(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    """A server may send fewer rows than `limit` asks: each page says `has_more`
    with the cursor of its last row until the last page."""
    for i in range(5):
        fake.add(f"s-{i}", "RUNNING")
    fake.page_rows = 2
    try:
        ids: list[str] = []
        sizes: list[int] = []
        cursor = ""
        while True:
            params = {"limit": 100, **({"after": cursor} if cursor else {})}
            page = strict(
                SessionsListResponse, fetch(fake, "/rl/training-sessions", params=params), coverage
            )
            assert page.data is not None and page.meta is not None
            ids += [s.id for s in page.data]
            sizes.append(len(page.data))
            if not page.meta.has_more:
                assert page.meta.next_cursor == ""
                break
            assert page.meta.next_cursor == page.data[-1].id
            cursor = page.meta.next_cursor
    finally:
        fake.page_rows = None
    assert sizes == [2, 2, 1] and ids == [f"s-{i}" for i in range(5)]


def test_an_endless_list_says_has_more_with_a_fresh_cursor_in_the_sdks_shape(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    fake.add("e-1", "RUNNING")
    fake.endless_list = True
    try:
        cursors, ids = [], []
        cursor = ""
        for _ in range(4):
            params = {"status[]": "TRAINING_SESSION_STATUS_RUNNING", "limit": 100}
            page = strict(
                SessionsListResponse,
                fetch(fake, "/rl/training-sessions", params={**params, "after": cursor}),
                coverage,
            )
            assert page.meta is not None and page.meta.has_more and page.meta.next_cursor
            ids += [s.id for s in page.data or []]
            assert all(s.status == "TRAINING_SESSION_STATUS_RUNNING" for s in page.data or [])
            cursor = page.meta.next_cursor
            cursors.append(cursor)
    finally:
        fake.endless_list = False
    assert ids[0] == "e-1" and len(set(ids)) == 4 and len(set(cursors)) == 4


def test_list_filters_brackets_comma_creator_and_resource(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    fake.add("f-run", "RUNNING")
    fake.add("f-err", "ERROR", created_by="user_other")
    fake.add("f-stop", "STOPPED", model_resources_id="res-1")

    def ids(query: str) -> list[str]:
        page = strict(SessionsListResponse, fetch(fake, f"/rl/training-sessions?{query}"), coverage)
        return [s.id for s in page.data or []]

    err, run = "TRAINING_SESSION_STATUS_ERROR", "TRAINING_SESSION_STATUS_RUNNING"
    assert ids(f"status[]={err}&status[]={run}") == ["f-run", "f-err"]
    assert ids(f"status%5B%5D={err}") == ["f-err"]
    assert ids(f"status={err}%2C{run}") == ["f-run", "f-err"]  # the SDK's own form
    assert ids("created_by=me") == ["f-run", "f-stop"]
    assert ids("created_by=user_other") == ["f-err"]
    assert ids("model_resources_id=res-1") == ["f-stop"]
    assert ids("status[]=TRAINING_SESSION_STATUS_EXPIRED") == []


def test_the_sdk_client_talks_to_the_fake(fake: FakeTogether) -> None:
    """Together's own client, end to end: paths, its query format, its parsing."""
    fake.add("k-run", "RUNNING")
    fake.add("k-err", "ERROR")
    fake.add("k-stop", "STOPPED")
    client = together.Together(api_key=KEY, base_url=fake.url, max_retries=0)
    page = client.post_training.sessions.list(
        status=["TRAINING_SESSION_STATUS_ERROR", "TRAINING_SESSION_STATUS_RUNNING"], limit=100
    )
    assert [s.id for s in page.data or []] == ["k-run", "k-err"]
    assert page.meta is not None and page.meta.has_more is False
    assert client.post_training.sessions.retrieve("k-err").error is not None
    assert client.post_training.sessions.stop("k-run").status == "TRAINING_SESSION_STATUS_STOPPING"
    resource_id = fake.get("k-run")["model_resources_id"]  # type: ignore[index]
    assert client.post_training.model_resources.retrieve(resource_id).id == resource_id
    estimate = client.post_training.model_resources.estimate_cost(
        base_model="Qwen/Qwen3.5-4B",
        compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 1},
    )
    assert estimate.price_per_hour == pytest.approx(2 * DEFAULT_PRICES["B200-SXM"])
    fake.add("k-run-2", "RUNNING", model_resources_id="k-res")
    with pytest.raises(together.BadRequestError):
        client.post_training.model_resources.stop("k-res")  # the SDK sends ?force= in the query
    stopped = client.post_training.model_resources.stop("k-res", force=True)
    assert stopped.status == "MODEL_RESOURCES_STATUS_STOPPING"
    assert fake.resource_stop_requests[-1] == ("k-res", True)
    with pytest.raises(together.NotFoundError) as missing:
        client.post_training.sessions.retrieve("nope")
    ErrorBody.model_validate(missing.value.body, strict=True)


# --- model resources -------------------------------------------------------------------------


@pytest.mark.parametrize("status", RESOURCE_STATUSES)
def test_model_resource_in_each_status(
    fake: FakeTogether, coverage: FieldCoverage, status: str
) -> None:
    fake.add_resource(f"r-{status.lower()}", status)
    response = fetch(fake, f"/rl/model-resources/r-{status.lower()}")
    assert response.status_code == 200
    resource = strict(ModelResources, response, coverage)
    assert resource.status == f"MODEL_RESOURCES_STATUS_{status}"


def test_model_resource_of_a_session_and_resource_pages(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    session = fake.add("m-1")
    resource = strict(
        ModelResources, fetch(fake, f"/rl/model-resources/{session['model_resources_id']}")
    )
    assert resource.base_model == session["base_model"]
    for i in range(3):
        fake.add_resource(f"rp-{i}", "READY" if i else "PENDING")
    first = strict(
        ModelResourcesListResponse, fetch(fake, "/rl/model-resources", params={"limit": 2})
    )
    assert [r.id for r in first.data] == ["rp-0", "rp-1"] and first.meta.has_more
    rest = strict(
        ModelResourcesListResponse,
        fetch(fake, "/rl/model-resources", params={"limit": 2, "after": first.meta.next_cursor}),
        coverage,
    )
    assert [r.id for r in rest.data] == ["rp-2"] and rest.meta.has_more is False
    ready = strict(
        ModelResourcesListResponse,
        fetch(fake, "/rl/model-resources?status[]=MODEL_RESOURCES_STATUS_PENDING"),
    )
    assert [r.id for r in ready.data] == ["rp-0"]


def _resource_of(fake: FakeTogether, session_id: str) -> str:
    return str(fake.get(session_id)["model_resources_id"])  # type: ignore[index]


def _resource_body(fake: FakeTogether, **over: Any) -> dict[str, Any]:
    """An estimate-cost body from a stored resource's own fields, as the bot sends it."""
    resource = fake.add_resource("r-priced", "READY", **over)
    body = {
        key: resource[key]
        for key in ("base_model", "compute_config", "lora_enabled", "inactive_timeout")
    }
    return body | {"optimizer_config": resource["optimizer_config"]}


@pytest.mark.parametrize(("gpu", "replicas"), [("H100-80GB", 1), ("B200-SXM", 0), ("B200-SXM", 4)])
def test_estimate_cost_answer(
    fake: FakeTogether, coverage: FieldCoverage, gpu: str, replicas: int
) -> None:
    config = {"gpu_type": gpu, "num_generator_replicas": replicas}
    body = _resource_body(fake, compute_config=config)
    response = fetch(fake, "/rl/model-resources/estimate-cost", method="POST", json=body)
    assert response.status_code == 200
    estimate = strict(ModelResourcesEstimateCostResponse, response, coverage)
    assert estimate.currency == "USD"
    assert estimate.price_per_hour == pytest.approx(DEFAULT_PRICES[gpu] * (1 + replicas))
    assert fake.estimate_requests[-1] == body


def test_estimate_cost_answer_in_another_currency(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    fake.currencies["B200-SXM"] = "EUR"
    body = _resource_body(
        fake, compute_config={"gpu_type": "B200-SXM", "num_generator_replicas": 1}
    )
    response = fetch(fake, "/rl/model-resources/estimate-cost", method="POST", json=body)
    estimate = strict(ModelResourcesEstimateCostResponse, response, coverage)
    assert estimate.currency == "EUR"


def test_resource_stop_refused_while_a_session_is_active_unless_forced(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    fake.reset_counts()
    fake.add("rs-run", "RUNNING")
    fake.add("rs-done", "STOPPED")
    resource_id = _resource_of(fake, "rs-run")
    path = f"/rl/model-resources/{resource_id}/stop"
    refused = fetch(fake, path, method="POST", json={"force": False})
    assert refused.status_code == 400
    assert ErrorBody.model_validate_json(refused.content, strict=True).error.code == (
        "failed_precondition"
    )
    assert fake.resource_stop_requests == []
    stopped = strict(ModelResources, fetch(fake, path, method="POST", json={"force": True}))
    assert stopped.status == "MODEL_RESOURCES_STATUS_STOPPING" and stopped.expires_at is None
    assert fake.resource_stop_requests == [(resource_id, True)]
    assert fake.get("rs-run")["status"] == "TRAINING_SESSION_STATUS_STOPPING"  # type: ignore[index]
    assert fake.get("rs-done")["status"] == "TRAINING_SESSION_STATUS_STOPPED"  # type: ignore[index]
    # A resource with no active session stops without force.
    fake.add_resource("rs-idle", "READY")
    idle = fetch(fake, "/rl/model-resources/rs-idle/stop", method="POST")
    assert strict(ModelResources, idle, coverage).status == "MODEL_RESOURCES_STATUS_STOPPING"


def test_resource_knobs_give_real_shapes(fake: FakeTogether, coverage: FieldCoverage) -> None:
    """Queue position, expires_at and status changes set by tests stay SDK-valid."""
    session = fake.add("kn-1", "CREATING")
    resource_id = session["model_resources_id"]
    fake.set_resource(resource_id, "PENDING", queue_position=7)
    pending = strict(ModelResources, fetch(fake, f"/rl/model-resources/{resource_id}"), coverage)
    assert pending.status_details.queue_position == 7 and pending.expires_at is None
    fake.set_resource(resource_id, "READY", expires_at="2026-01-02T03:04:05Z")
    ready = strict(ModelResources, fetch(fake, f"/rl/model-resources/{resource_id}"), coverage)
    assert ready.status_details.queue_position is None
    assert ready.expires_at is not None and ready.expires_at.hour == 3
    fake.set_resource(resource_id, "STOPPED")
    stopped = strict(ModelResources, fetch(fake, f"/rl/model-resources/{resource_id}"), coverage)
    assert stopped.expires_at is None


def test_a_stop_served_then_answered_oddly_leaves_real_shapes(
    fake: FakeTogether, coverage: FieldCoverage
) -> None:
    """`fail(after=True)`: the stop takes effect, its answer is the fault's; the
    state read afterwards (and a route-limited fault's error) is still Together's."""
    fake.add("o-run", "RUNNING")
    fake.fail("o-run", route="get", status=503, times=1)
    fake.fail("o-run", route="stop", body='{"accepted": true}', after=True, times=1)
    odd = fetch(fake, "/rl/training-sessions/o-run/stop", method="POST")
    assert odd.status_code == 200 and odd.json() == {"accepted": True}
    assert fake.stop_requests[-1] == "o-run"
    failed = fetch(fake, "/rl/training-sessions/o-run")
    assert failed.status_code == 503
    assert ErrorBody.model_validate_json(failed.content, strict=True).error.code
    stopping = strict(Session, fetch(fake, "/rl/training-sessions/o-run"), coverage)
    assert stopping.status == "TRAINING_SESSION_STATUS_STOPPING"

    fake.add_resource("o-res", "READY")
    fake.fail("o-res", route="resource_stop", body="", delay=0.01, after=True, times=1)
    empty = fetch(fake, "/rl/model-resources/o-res/stop", method="POST")
    assert empty.status_code == 200 and empty.content == b""
    resource = strict(ModelResources, fetch(fake, "/rl/model-resources/o-res"), coverage)
    assert resource.status == "MODEL_RESOURCES_STATUS_STOPPING"


# --- error bodies ----------------------------------------------------------------------------


def _error_cases(fake: FakeTogether) -> list[tuple[str, httpx.Response]]:
    fake.add("e-1")
    base = fake.base_url
    cases = [
        ("401 bad key", httpx.get(f"{base}/rl/training-sessions/e-1", headers={})),
        ("404 session", fetch(fake, "/rl/training-sessions/nope")),
        ("404 stop", fetch(fake, "/rl/training-sessions/nope/stop", method="POST")),
        ("404 resource", fetch(fake, "/rl/model-resources/nope")),
        ("404 route", fetch(fake, "/rl/nothing-here")),
        ("405 method", fetch(fake, "/rl/training-sessions/e-1", method="DELETE")),
        ("400 limit", fetch(fake, "/rl/training-sessions?limit=lots")),
        ("400 status", fetch(fake, "/rl/training-sessions?status[]=RUNNINGISH")),
        ("400 estimate", fetch(fake, "/rl/model-resources/estimate-cost", method="POST", json={})),
        ("405 estimate", fetch(fake, "/rl/model-resources/estimate-cost")),
        ("404 resource stop", fetch(fake, "/rl/model-resources/nope/stop", method="POST")),
        (
            "400 resource stop while a session is active",
            fetch(fake, f"/rl/model-resources/{_resource_of(fake, 'e-1')}/stop", method="POST"),
        ),
    ]
    for status in (400, 401, 403, 404, 429, 500, 502, 503):
        fake.fail("e-1", status=status, times=1)
        cases.append((f"{status} fault", fetch(fake, "/rl/training-sessions/e-1")))
    return cases


def test_each_error_body(fake: FakeTogether) -> None:
    for label, response in _error_cases(fake):
        assert response.status_code >= 400, label
        body = ErrorBody.model_validate_json(response.content, strict=True)
        assert body.error.message and body.error.type, label


# --- the check itself fails on drift ---------------------------------------------------------


def _served(fake: FakeTogether, body: Any) -> httpx.Response:
    fake.add("drift")
    fake.fail("drift", body=json.dumps(body), times=1)
    return fetch(fake, "/rl/training-sessions/drift")


@pytest.mark.parametrize(
    "drift",
    [
        pytest.param(lambda s: s.update(step=42.0), id="float-step"),
        pytest.param(lambda s: s.update(created_at=1767312000), id="epoch-datetime"),
        pytest.param(lambda s: s["policy_state"].pop("trainer_step"), id="policy-missing-field"),
        pytest.param(lambda s: s.update(status="RUNNING"), id="short-status"),
        pytest.param(lambda s: s.update(error={"message": "x", "occurred_at": "2026-01-02T00:00:00Z"}), id="error-without-code"),
        pytest.param(lambda s: s.pop("base_model"), id="no-base-model"),
        pytest.param(lambda s: s.update(model_resource_id=s.pop("model_resources_id")), id="misspelt-key"),
        pytest.param(lambda s: s["lora_config"].update(dropout="0.05"), id="dropout-as-string"),
        pytest.param(lambda s: s["training_checkpoints"][0].update(registration={"model": {"id": "a", "revision_id": "b"}}), id="training-registration-as-inference"),
        pytest.param(lambda s: s["metadata"]["wandb"].update(link="https://wandb.ai/x"), id="unknown-wandb-key"),
    ],
)  # fmt: skip
def test_drifted_session_fails_the_check(fake: FakeTogether, drift: Any) -> None:
    body = make_session("drift")
    drift(body)
    response = _served(fake, body)
    with pytest.raises((ValidationError, AssertionError)):
        strict(Session, response)


def test_old_seed_shape_is_not_what_the_sdk_accepts(fake: FakeTogether) -> None:
    """The older seed shape stays a separate, backward-compatibility fixture."""
    fake.add_old_shape("old-1")
    with pytest.raises(ValidationError):
        strict(Session, fetch(fake, "/rl/training-sessions/old-1"))
    old = make_old_shape_session("x")
    assert "display_name" not in old and "base_model" not in old and "policy_state" not in old
    assert "model_name" in old["inference_checkpoints"][0]["registration"]
    assert make_session("x", new_shape=False).keys() == old.keys()


def test_top_level_pagination_is_drift(fake: FakeTogether) -> None:
    fake.add("drift")
    body = {"data": [make_session("drift")], "has_more": False, "next_cursor": None}
    fake.fail(None, body=json.dumps(body), times=1)
    response = fetch(fake, "/rl/training-sessions")
    with pytest.raises(AssertionError):
        strict(SessionsListResponse, response)
    assert Meta.model_fields.keys() == {"has_more", "limit", "next_cursor"}


def test_error_body_check_is_exact() -> None:
    for bad in (
        {"error": {"message": "m", "type": "t", "code": "c"}},  # no param
        {"error": {"message": "m", "type": "t", "param": None, "code": 404}},
        {"message": "m"},
        {"error": "not found"},
    ):
        with pytest.raises(ValidationError):
            ErrorBody.model_validate_json(json.dumps(bad), strict=True)


async def test_our_client_sends_statuses_in_brackets_form(fake: FakeTogether) -> None:
    """The bot's own client: `status[]=A&status[]=B` (Together's API notes), filters, meta pages."""
    from bot.together.client import TogetherClient

    for i in range(3):
        fake.add(f"b-err-{i}", "ERROR")
    sent = len(fake.paths)
    async with httpx.AsyncClient() as http:
        client = TogetherClient(http, base_url=fake.base_url, api_key=fake.api_key)
        first, cursor = await client.list_sessions(
            status=["TRAINING_SESSION_STATUS_ERROR", "TRAINING_SESSION_STATUS_RUNNING"],
            created_by="me",
            limit=2,
        )
        assert cursor is not None
        rest, last = await client.list_sessions(
            status=["TRAINING_SESSION_STATUS_ERROR"], after=cursor, limit=2
        )
    assert [s.id for s in first + rest] == ["b-err-0", "b-err-1", "b-err-2"]
    assert last is None
    query = parse_qs(urlsplit(fake.paths[sent]).query)
    assert query["status[]"] == ["TRAINING_SESSION_STATUS_ERROR", "TRAINING_SESSION_STATUS_RUNNING"]
    assert query["created_by"] == ["me"] and "status" not in query
