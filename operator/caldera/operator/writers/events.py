"""Kubernetes Events with Volcano's reasons: posted in the background, deduplicated, bounded.

Posting is best effort: an event that cannot be posted is logged and dropped, never retried,
because events are informational and must not pile up behind an unhealthy API server. For the
same reason at most ``backlog`` events wait to be posted (more are dropped and counted), and at
most ``workers`` are posted at once. An event that repeats the last one posted about the same
object (same type, reason and message) within ``repeat_after`` seconds is not posted again.
With ``enabled`` off nothing is posted at all.

Events give way to binds: while ``busy`` says more urgent writes are waiting (binds during a
burst), an event waits too, up to ``patience`` seconds, so the API server spends a burst binding
pods and the events follow right after.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.resources import EVENTS
from caldera.k8s.rest import Rest
from caldera.models.base import format_timestamp
from caldera.operator.memo import Recent
from caldera.operator.writers.retry import WorkQueue

__all__ = ["EventPoster"]

log = logging.getLogger(__name__)


class EventPoster:
    def __init__(
        self,
        rest: Rest,
        component: str,
        *,
        enabled: bool = True,
        workers: int = 16,
        backlog: int = 10_000,
        repeat_after: float = 600.0,
        patience: float = 5.0,
    ) -> None:
        self.busy: Callable[[], bool] = lambda: False
        """True while more urgent writes wait (set by whoever owns them)."""
        self._patience = patience
        self._rest = rest
        self._component = component
        self.enabled = enabled
        self._backlog = backlog
        self._seq = itertools.count()
        self._recent = Recent(ttl=repeat_after)
        self.dropped = 0
        self.queue: WorkQueue[int, dict[str, str]] = WorkQueue(
            "events", self._post, workers=workers
        )

    async def drain(self) -> None:
        """Wait for the events still waiting (e.g. before closing the client)."""
        await self.queue.join()

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
        if not self.enabled:
            return
        # remembered by the object's UID and the news's hash: the memory holds ten minutes of
        # events, one per pod bound at the least, so each is kept small
        about = event["uid"] or f"{event['kind']}/{event.get('namespace', '')}/{event['name']}"
        if not self._recent.fresh(about, hash((event["type_"], event["reason"], event["message"]))):
            return
        if len(self.queue) >= self._backlog:
            self.dropped += 1
            return
        self.queue.put(next(self._seq), event)

    async def _post(self, _: int, event: dict[str, str]) -> bool:
        waited = 0.0
        while self.busy() and waited < self._patience:
            await asyncio.sleep(0.05)
            waited += 0.05
        kind, namespace, name = event["kind"], event.get("namespace") or "default", event["name"]
        now = format_timestamp(datetime.now(UTC).timestamp())
        involved = {
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "apiVersion": event.get("api_version", "v1"),
        }
        if event["uid"]:
            involved["uid"] = event["uid"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": involved,
            "reason": event["reason"],
            "message": event["message"][:1024],
            "type": event["type_"],
            "source": {"component": self._component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self._component,
        }
        try:
            await self._rest.call("create", EVENTS, namespace=namespace, body=body)
        except API_ERRORS as exc:  # informational only: log and move on
            if self._rest.reach.counted(exc, "event"):
                return True  # dropped, as any failed event is; the outage is said once
            log.warning(
                "event %s on %s %s/%s not posted: %s",
                event["reason"],
                kind,
                namespace,
                name,
                describe(exc),
            )
        return True
