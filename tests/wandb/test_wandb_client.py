"""The W&B client against the W&B-shaped server: what it sends, what it reads,
and each way a read can fail (a clear `WandbError`, never a crash)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from bot.simulated.wandb import QUERIES, FakeRun, FakeWandb, normalized
from bot.training.sessions import WandbEntry
from bot.wandb.client import HISTORY_QUERY, WandbClient
from bot.wandb.errors import WandbError
from bot.wandb.runs import RunRef, run_of

KEY = "wandb-test-key"
RUN = RunRef("team", "rl", "abc123")

#: the text `wandb` 0.x sends for `Run.history(keys=[...])`
#: (wandb/apis/public/runs.py, `Run._sampled_history`), as published
SDK_QUERY = """
        query RunSampledHistory($project: String!, $entity: String!, $name: String!, $specs: [JSONString!]!) {
            project(name: $project, entityName: $entity) {
                run(name: $name) { sampledHistory(specs: $specs) }
            }
        }
        """


class _SdkRun(BaseModel):
    """What the SDK reads of the answer: `project.run.sampledHistory[0]`, a list of rows."""

    sampledHistory: list[list[dict[str, object]]]  # W&B's own name


class _SdkProject(BaseModel):
    run: _SdkRun | None


class _SdkData(BaseModel):
    project: _SdkProject | None


@pytest.fixture(scope="module")
def wandb() -> Iterator[FakeWandb]:
    with FakeWandb(api_key=KEY) as fake:
        rows = [{"_step": i, "reward": i / 10, "loss": 1 / (i + 1)} for i in range(50)]
        rows[20]["loss"] = math.nan
        rows.append({"_step": 50.0, "reward": "Infinity"})
        rows.append({"_step": 51, "reward": "done"})
        rows.append({"reward": 3.0})
        fake.add_run("team", "rl", "abc123", FakeRun(rows=rows))
        yield fake


@pytest.fixture
async def client(wandb: FakeWandb) -> AsyncIterator[WandbClient]:
    wandb.reset()
    async with httpx.AsyncClient() as http:
        yield WandbClient(http, base_url=wandb.url, api_key=KEY, timeout=2.0)


def test_the_bot_sends_the_sdk_query_text() -> None:
    assert normalized(HISTORY_QUERY) == normalized(SDK_QUERY)
    assert normalized(QUERIES["RunSampledHistory"]) == normalized(SDK_QUERY)


async def test_history_reads_each_metric_with_basic_auth_and_json_string_specs(
    client: WandbClient, wandb: FakeWandb
) -> None:
    found = await client.history(RUN, ["reward", "loss"])
    call = wandb.calls[-1]
    assert call.authorization == "Basic " + base64.b64encode(f"api:{KEY}".encode()).decode()
    assert call.operation == "RunSampledHistory"
    assert all(isinstance(s, str) for s in call.variables["specs"])
    assert [s["keys"] for s in call.specs] == [["_step", "reward"], ["_step", "loss"]]
    assert call.variables["name"] == "abc123"
    reward, loss = found["reward"], found["loss"]
    assert reward.steps[:3] == (0.0, 1.0, 2.0) and reward.values[-1] == math.inf
    assert reward.skipped == 1  # the text value; the row without `_step` is skipped too
    assert len(loss.steps) == 50 and math.isnan(loss.values[20])
    assert loss.first_bad() == (20.0, loss.values[20])


async def _ask_as_the_sdk(wandb: FakeWandb, specs: list[Any]) -> Any:
    """The SDK's own query for run abc123 with these specs, as the SDK sends it."""
    variables = {"entity": "team", "project": "rl", "name": "abc123", "specs": specs}
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            wandb.url + "/graphql",
            json={"query": SDK_QUERY, "variables": variables},
            auth=("api", KEY),
        )
    return answer.json()


async def test_the_served_answer_is_what_the_sdk_reads(wandb: FakeWandb) -> None:
    specs = [json.dumps({"keys": ["_step", "reward", "loss"], "samples": 500})]
    answer = await _ask_as_the_sdk(wandb, specs)
    data = _SdkData.model_validate(answer["data"])
    assert data.project is not None and data.project.run is not None
    rows = data.project.run.sampledHistory[0]
    assert rows and all({"_step", "reward", "loss"} <= set(r) for r in rows)
    assert "NaN" in [r["loss"] for r in rows]  # non-finite values as W&B's strings


async def test_specs_sent_as_objects_get_a_graphql_error(wandb: FakeWandb) -> None:
    answer = await _ask_as_the_sdk(wandb, [{"keys": ["_step"]}])
    assert answer["data"] is None and "JSONString" in answer["errors"][0]["message"]


@pytest.mark.parametrize(
    ("run", "kind", "words"),
    [
        (RunRef("team", "nope", "abc123"), "not_found", "no project team/nope"),
        (RunRef("team", "rl", "gone"), "not_found", "no run team/rl/gone"),
    ],
)
async def test_unknown_project_or_run(
    client: WandbClient, run: RunRef, kind: str, words: str
) -> None:
    with pytest.raises(WandbError) as caught:
        await client.history(run, ["reward"])
    assert caught.value.kind == kind and words in caught.value.user_message


async def test_a_wrong_key_is_refused(wandb: FakeWandb) -> None:
    async with httpx.AsyncClient() as http:
        bad = WandbClient(http, base_url=wandb.url, api_key="wrong")
        with pytest.raises(WandbError) as caught:
            await bad.history(RUN, ["reward"])
    assert caught.value.kind == "auth" and "API key" in caught.value.user_message
    assert "WANDB_API_KEY" not in caught.value.user_message  # the operator's word


async def test_graphql_errors_server_errors_and_dropped_connections(
    client: WandbClient, wandb: FakeWandb
) -> None:
    wandb.fail_next(errors=["permission denied"])
    with pytest.raises(WandbError) as caught:
        await client.history(RUN, ["reward"])
    assert caught.value.kind == "graphql" and "permission denied" in caught.value.user_message
    wandb.fail_next(status=502)
    with pytest.raises(WandbError, match="unreachable"):
        await client.history(RUN, ["reward"])
    wandb.fail_next(disconnect=True)
    with pytest.raises(WandbError, match="unreachable"):
        await client.history(RUN, ["reward"])
    wandb.fail_next(delay=0.8)
    async with httpx.AsyncClient() as http:
        impatient = WandbClient(http, base_url=wandb.url, api_key=KEY, timeout=0.3)
        with pytest.raises(WandbError, match="timed out"):
            await impatient.history(RUN, ["reward"])


@pytest.mark.parametrize(
    "body",
    [
        '{"data": {"project": {"run": {"sampledHistory": ' + "[" * 5000 + "]" * 5000 + "}}}}",
        '{"data": {"project": {"run": {"sampledHistory": [[{"_step": ' + "7" * 5000 + "}]]}}}}",
    ],
    ids=["nested-too-deep", "5000-digit-number"],
)
async def test_an_answer_no_json_reader_takes_is_a_bad_response(
    client: WandbClient, wandb: FakeWandb, body: str
) -> None:
    wandb.add_run("team", "rl", "odd", FakeRun(answer_text=body))
    for read in (client.history, client.card):
        with pytest.raises(WandbError) as caught:
            await read(RunRef("team", "rl", "odd"), ["reward"])
        assert caught.value.kind == "bad_response"


async def test_a_summary_nested_too_deep_reads_as_no_summary(
    client: WandbClient, wandb: FakeWandb
) -> None:
    rows = [{"_step": i, "reward": i / 10} for i in range(5)]
    wandb.add_run("team", "rl", "deep", FakeRun(rows=rows, summary="[" * 5000 + "]" * 5000))
    latest, recent = await client.card(RunRef("team", "rl", "deep"), ["reward"])
    assert latest == {} and recent["reward"].values[-1] == 0.4


async def test_a_metric_never_logged_is_an_empty_series(client: WandbClient) -> None:
    found = await client.history(RUN, ["kl"])
    assert found["kl"].empty


async def test_an_answer_over_the_byte_cap_is_refused(wandb: FakeWandb) -> None:
    big = [{"_step": i, "reward": float(i)} for i in range(20_000)]
    wandb.add_run("team", "rl", "big", FakeRun(rows=big))
    async with httpx.AsyncClient() as http:
        small = WandbClient(http, base_url=wandb.url, api_key=KEY, max_response_bytes=10_000)
        with pytest.raises(WandbError, match="larger than"):
            await small.history(RunRef("team", "rl", "big"), ["reward"])


async def test_the_budget_refuses_requests_beyond_it_unsent(wandb: FakeWandb) -> None:
    wandb.reset()
    async with httpx.AsyncClient() as http:
        tight = WandbClient(http, base_url=wandb.url, api_key=KEY, per_minute=2)
        await tight.history(RUN, ["reward"])
        await tight.history(RUN, ["reward"])
        with pytest.raises(WandbError) as caught:
            await tight.history(RUN, ["reward"])
    assert caught.value.kind == "budget" and len(wandb.calls) == 2


async def test_card_reads_summary_and_recent_points_in_one_request(
    client: WandbClient, wandb: FakeWandb
) -> None:
    latest, recent = await client.card(RUN, ["reward", "loss"])
    assert len(wandb.calls) == 1 and wandb.calls[0].operation == "RunSummarySampledHistory"
    assert latest["loss"] == pytest.approx(1 / 50)
    assert len(recent["reward"].steps) <= 100
    # when each point was logged rides along (it times a rule's crossing)
    assert all(spec["keys"][:2] == ["_step", "_timestamp"] for spec in wandb.calls[0].specs)
    assert len(recent["reward"].times) == len(recent["reward"].steps) > 0


def test_run_of_reads_metadata_wandb_and_refuses_partial_names() -> None:
    def run(metadata: Any) -> RunRef | None:
        return run_of(WandbEntry.of(metadata))

    assert run({"wandb": {"entity": "e", "project": "p", "run_id": "r"}}) == RunRef("e", "p", "r")
    assert run({"wandb": {"entity": "e", "project": "p"}}) is None
    assert run({"wandb": {"entity": "e", "project": 7, "run_id": "r"}}) is None
    assert run({"wandb": "e/p/r"}) is None
    assert run(["wandb"]) is None
    assert run(None) is None
