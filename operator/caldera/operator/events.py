"""Kubernetes Events with Volcano's reasons, posted only when something changed.

Posting is best effort: an event that cannot be posted is logged and dropped, never retried
forever, because events are informational and must not pile up behind an unhealthy API server.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime

from kubernetes_asyncio import client

from caldera.k8s.calls import send
from caldera.k8s.errors import API_ERRORS, classify
from caldera.models.base import format_timestamp

__all__ = ["EventPoster"]

log = logging.getLogger(__name__)


class EventPoster:
    def __init__(self, api: client.ApiClient, component: str) -> None:
        self._core = client.CoreV1Api(api)
        self._component = component
        self._pending: set[asyncio.Task[None]] = set()

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait (briefly) for events still being posted, e.g. before closing the client."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)

    def pod(
        self, namespace: str, name: str, uid: str, *, type_: str, reason: str, message: str
    ) -> None:
        """An event about a pod, posted in the background."""
        self.emit(
            kind="Pod",
            namespace=namespace,
            name=name,
            uid=uid,
            type_=type_,
            reason=reason,
            message=message,
        )

    def emit(self, **event: str) -> None:
        """Post in the background (the caller does not wait for the API)."""
        task = asyncio.create_task(self.post(**event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def post(
        self,
        *,
        kind: str,
        namespace: str,
        name: str,
        uid: str,
        type_: str,
        reason: str,
        message: str,
        api_version: str = "v1",
    ) -> None:
        now = format_timestamp(datetime.now(UTC).timestamp())
        involved = {"kind": kind, "namespace": namespace, "name": name, "apiVersion": api_version}
        if uid:
            involved["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace or "default",
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": self._component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self._component,
        }
        try:
            await send(self._core.create_namespaced_event, namespace or "default", body)
        except API_ERRORS as exc:  # informational only: log and move on
            log.warning(
                "event %s on %s %s/%s not posted: %s (%s)",
                reason,
                kind,
                namespace,
                name,
                exc,
                classify(exc).value,
            )
