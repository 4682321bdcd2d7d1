"""The Together-shaped server's model-resource routes that change or price one:
`estimate-cost` and a resource's `stop` (refused while a session on it is active,
unless forced)."""

from __future__ import annotations

import json

from ._http import Response
from .together_lists import _one
from .together_shapes import STATUS_PREFIX, error_body
from .together_store import TogetherStore

__all__ = ["ResourceRoutes"]

#: session statuses that block a stop without `force`
_ACTIVE = frozenset(STATUS_PREFIX + s for s in ("CREATING", "RUNNING", "STOPPING"))


class ResourceRoutes(TogetherStore):
    """`_estimate` and `_stop_resource`, served by `FakeTogether._serve`."""

    def _estimate(self, raw: bytes) -> Response:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("base_model"), str):
            return Response.json(
                error_body("base_model is required", "invalid_parameter", param="base_model"),
                status=400,
            )
        config = body.get("compute_config")
        if not isinstance(config, dict):
            config = {}
        gpu = config.get("gpu_type") or "H100-80GB"
        replicas = config.get("num_generator_replicas", 1)
        if gpu not in self.prices or not isinstance(replicas, int) or replicas < 0:
            return Response.json(
                error_body("Invalid compute_config", "invalid_parameter", param="compute_config"),
                status=400,
            )
        with self._lock:
            self.estimate_requests.append(body)
            price = self.prices[gpu] * (1 + replicas)
            currency = self.currencies.get(gpu, "USD")
        return Response.json({"currency": currency, "price_per_hour": round(price, 4)})

    def _stop_resource(self, resource_id: str, raw: bytes, query: dict[str, list[str]]) -> Response:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        flag = body.get("force") if isinstance(body, dict) else None
        if not isinstance(flag, bool):
            flag = (_one(query, "force") or "false").lower() == "true"
        if self.resource(resource_id) is None:
            return Response.json(error_body("Model resource not found", "not_found"), status=404)
        with self._cond:
            attached = [
                s
                for s in self.sessions.values()
                if s.get("model_resources_id") == resource_id and s.get("status") in _ACTIVE
            ]
            if attached and not flag:
                return Response.json(
                    error_body(
                        f"{len(attached)} training session(s) are still active on this "
                        "model resource; stop them first or pass force=true",
                        "failed_precondition",
                    ),
                    status=400,
                )
            self.resource_stop_requests.append((resource_id, flag))
        for session in attached:
            self.set_status(str(session["id"]), "STOPPING")
        return Response.json(self.set_resource(resource_id, "STOPPING"))
