"""Together's model-resource endpoints: the GPUs a session runs on, their
price, and stopping them (what the spend and idle watches ask)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from bot.together.answers import list_query, next_cursor, parse_each, parse_one
from bot.together.errors import TogetherError
from bot.together.page_reader import read_page
from bot.together.transport import Transport
from bot.training.checkpoints import CheckpointFile
from bot.training.resources import CostEstimate, ModelResource
from bot.training.sessions import is_session_id


class ModelResourceEndpoints(Transport):
    """The model-resource half of `TogetherClient`."""

    def resource_url(self, resource_id: str) -> str:
        if not is_session_id(resource_id):  # same id alphabet: nothing that changes the path
            raise TogetherError("invalid_id")
        return f"{self._base}/rl/model-resources/{quote(resource_id, safe='')}"

    async def get_model_resource(
        self, resource_id: str, *, max_wait: float | None = None
    ) -> ModelResource:
        """One model resource: its status, GPUs, queue position and `expires_at`."""
        data = await self._request(
            "GET", self.resource_url(resource_id), kind="resource_get", max_wait=max_wait
        )
        return _parse_resource(data, resource_id)

    async def list_model_resources(
        self,
        *,
        status: str | Sequence[str] | None = None,
        created_by: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> tuple[list[ModelResource], str | None]:
        """One page of model resources and the next page's cursor (None on the last).

        Same conventions as `list_sessions`: `status[]=A&status[]=B`, pagination
        under `meta`, and a row that does not parse is skipped, not fatal."""
        query = list_query(status, limit=limit, after=after, created_by=created_by)
        data = await self._request(
            "GET",
            f"{self._base}/rl/model-resources?{query}",
            kind="resource_list_page",
            read=read_page,
        )
        if not isinstance(data, dict):
            raise TogetherError("bad_response", "not a list of model resources")
        items = data.get("data") if isinstance(data.get("data"), list) else []
        resources = parse_each(ModelResource.model_validate, items or [], "model resource")
        return resources, next_cursor(data, resources[-1].id if resources else None)

    async def estimate_cost(self, resource: ModelResource) -> CostEstimate:
        """Together's on-demand price per hour for this resource's own layout."""
        data = await self._request(
            "POST",
            f"{self._base}/rl/model-resources/estimate-cost",
            kind="estimate_cost",
            body=resource.estimate_body(),
        )
        if not isinstance(data, dict):
            raise TogetherError("bad_response", "not a cost estimate")
        try:
            estimate = CostEstimate.model_validate(data)
        except ValidationError as exc:
            raise TogetherError("bad_response", "not a cost estimate") from exc
        if estimate.price_per_hour is None:
            raise TogetherError("bad_response", "no price_per_hour")
        return estimate

    async def stop_model_resource(
        self, resource_id: str, *, force: bool = False
    ) -> ModelResource | None:
        """Stop a resource, releasing (and no longer paying for) its GPUs: the
        resource as it is now, or None when Together accepted the stop but neither
        its answer nor a read after it says what the resource is now.

        Without `force` Together refuses while a session on it is active; with it,
        those sessions stop too. `force` goes both in the JSON body (Together's API
        notes) and in the query (where together 3.1.1's client puts it)."""
        flag = "true" if force else "false"
        url = f"{self.resource_url(resource_id)}/stop?force={flag}"
        try:
            data = await self._request("POST", url, kind="resource_stop", body={"force": force})
        except TogetherError as exc:
            if not exc.accepted:
                raise
            data = None  # a 2xx whose body is not JSON: accepted all the same
        try:
            return _parse_resource(data, resource_id)
        except TogetherError:  # the stop was accepted; the body is just not a resource
            pass
        try:
            return await self.get_model_resource(resource_id)
        except TogetherError:  # gone already, or unreadable just now
            return None

    async def extend_expiry(self, resource_id: str, seconds: int) -> ModelResource:
        """Keep a READY resource from stopping for inactivity for `seconds` from now
        (Together moves `expires_at`, never earlier); the resource as it is now.
        Together refuses a resource that is not READY (a TogetherError with its words)."""
        url = f"{self.resource_url(resource_id)}/extend-expiry"
        data = await self._request(
            "POST", url, kind="resource_extend", body={"seconds": int(seconds)}, max_wait=5.0
        )
        return _parse_resource(data, resource_id)

    async def checkpoint_files(self, checkpoint_id: str, variant: str) -> list[CheckpointFile]:
        """A checkpoint's files with their presigned download URLs (`variant` is
        CHECKPOINT_VARIANT_ADAPTER or _MERGED). The URLs expire and grant access:
        callers hand them to the person who asked and keep them nowhere."""
        if not is_session_id(checkpoint_id):  # the same id alphabet
            raise TogetherError("invalid_id")
        url = (
            f"{self._base}/rl/checkpoints/{quote(checkpoint_id, safe='')}/download"
            f"?variant={quote(variant, safe='')}"
        )
        data = await self._request("GET", url, kind="checkpoint_download", max_wait=5.0)
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise TogetherError("bad_response", "not a list of checkpoint files")
        files = []
        for item in items:
            try:
                files.append(CheckpointFile.model_validate(item))
            except ValidationError as exc:
                raise TogetherError("bad_response", "a checkpoint file does not parse") from exc
        return files


def _parse_resource(data: Any, resource_id: str) -> ModelResource:
    return parse_one(ModelResource.model_validate, data, resource_id, "model resource")
