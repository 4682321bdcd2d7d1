"""The Together-shaped server's routes for acting from an alert: a model
resource's extend-expiry and a checkpoint's download (presigned-looking URLs),
in the SDK's shapes (`ModelResources`, `CheckpointDownloadResponse`), over the
store `FakeTogether` holds."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ._http import Response
from .together_lists import _one
from .together_shapes import _parse_iso, error_body
from .together_store import TogetherStore

#: where the fake's presigned download URLs point
DOWNLOAD_HOST = "https://storage.fake-together.test"
RESOURCE_READY = "MODEL_RESOURCES_STATUS_READY"


class AlertActionRoutes(TogetherStore):
    """`_extend_expiry` and `_download`, served by `FakeTogether._serve`."""

    #: where this server's download URLs point (the demo points them at its page)
    download_host = DOWNLOAD_HOST

    def _extend_expiry(self, resource_id: str, raw: bytes) -> Response:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        seconds = body.get("seconds") if isinstance(body, dict) else None
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds <= 0:
            return Response.json(
                error_body(
                    "seconds must be a positive integer", "invalid_argument", param="seconds"
                ),
                status=400,
            )
        resource = self.resource(resource_id)
        if resource is None:
            return Response.json(error_body("Model resource not found", "not_found"), status=404)
        if resource["status"] != RESOURCE_READY:
            return Response.json(
                error_body(
                    f"model resource is not ready (status {resource['status']}); only a "
                    "ready resource can be extended",
                    "failed_precondition",
                ),
                status=400,
            )
        wanted = datetime.now(UTC) + timedelta(seconds=seconds)
        current = _parse_iso(resource.get("expires_at"))
        with self._lock:
            self.extend_requests.append((resource_id, seconds))
        return Response.json(
            self.set_resource(resource_id, expires_at=max(wanted, current or wanted))
        )

    def _checkpoint(self, checkpoint_id: str) -> tuple[str, dict[str, Any]] | None:
        """(kind, session) of a stored checkpoint: "inference" or "training"."""
        with self._lock:
            for session in self.sessions.values():
                for kind in ("inference", "training"):
                    for cp in session.get(f"{kind}_checkpoints") or []:
                        if isinstance(cp, dict) and cp.get("id") == checkpoint_id:
                            return kind, copy.deepcopy(session)
        return None

    def _download(self, checkpoint_id: str, query: dict[str, list[str]]) -> Response:
        variant = _one(query, "variant") or ""
        if variant not in ("CHECKPOINT_VARIANT_ADAPTER", "CHECKPOINT_VARIANT_MERGED"):
            return Response.json(
                error_body(
                    "variant must be ADAPTER or MERGED", "invalid_argument", param="variant"
                ),
                status=400,
            )
        found = self._checkpoint(checkpoint_id)
        if found is None:
            return Response.json(error_body("Checkpoint not found", "not_found"), status=404)
        kind, session = found
        if kind == "training":
            return Response.json(
                error_body(
                    "only inference checkpoints can be downloaded", "invalid_argument", param="id"
                ),
                status=400,
            )
        if variant.endswith("ADAPTER") and not session.get("lora_config"):
            return Response.json(
                error_body(
                    "the adapter variant exists only for LoRA sessions",
                    "invalid_argument",
                    param="variant",
                ),
                status=400,
            )
        names = (
            [("adapter_model.safetensors", 134_217_728), ("adapter_config.json", "812")]
            if variant.endswith("ADAPTER")
            else [("model-00001-of-00002.safetensors", 4_965_000_000), ("config.json", 1_204)]
        )
        files = []
        with self._lock:
            self.download_requests.append((checkpoint_id, variant))
            for name, size in names:
                signature = uuid.uuid4().hex
                self.download_signatures.append(signature)
                self.download_signed[signature] = (checkpoint_id, name)
                files.append(
                    {
                        "filename": name,
                        "size": size,
                        "url": f"{self.download_host}/ckpt/{checkpoint_id}/{name}"
                        f"?X-Amz-Expires=900&X-Amz-Signature={signature}",
                    }
                )
        return Response.json({"data": files})
