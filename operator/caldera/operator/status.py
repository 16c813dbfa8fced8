"""Status writer: PodGroup status, Queue ``status.allocated`` and pods' ``PodScheduled``.

Each write happens only when the value changed, goes through a keyed retry queue (a newer status
for the same object replaces one still waiting), and follows Volcano's method:

- PodGroup has no status subresource, so its status is written by a whole-object update carrying
  the resourceVersion of the copy the watch delivered; a conflict re-reads and retries.
- Queue ``status.allocated`` is a merge patch of the status subresource.
- A pod's ``PodScheduled`` condition is a strategic-merge patch of ``pods/status`` (conditions are
  merged by type), posted with a ``FailedScheduling`` event carrying the same text.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from caldera.framework.intents import PodCondition, PodGroupStatus, QueueStatus
from caldera.k8s.calls import send
from caldera.k8s.errors import API_ERRORS, gives_up
from caldera.k8s.resources import MERGE_PATCH, SCHEDULING_GROUP, SCHEDULING_VERSION
from caldera.models.base import format_timestamp
from caldera.operator.events import EventPoster
from caldera.operator.retry import WorkQueue

__all__ = ["StatusWriter"]

GROUP, VERSION = SCHEDULING_GROUP, SCHEDULING_VERSION


class StatusWriter:
    def __init__(
        self,
        api: client.ApiClient,
        events: EventPoster,
        *,
        workers: int = 16,
        cached_podgroup: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self._cached_podgroup = cached_podgroup or (lambda key: None)
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._events = events
        self.podgroups: WorkQueue[str, PodGroupStatus] = WorkQueue(
            "podgroup-status", self._podgroup, workers=workers
        )
        self.queues: WorkQueue[str, QueueStatus] = WorkQueue("queue-status", self._queue, workers=2)
        self.pods: WorkQueue[str, PodCondition] = WorkQueue(
            "pod-condition", self._pod, workers=workers
        )

    def podgroup(self, status: PodGroupStatus) -> None:
        self.podgroups.put(f"{status.namespace}/{status.name}", status)

    def queue(self, status: QueueStatus) -> None:
        self.queues.put(status.name, status)

    def pod(self, condition: PodCondition) -> None:
        self.pods.put(f"{condition.namespace}/{condition.name}", condition)

    async def _podgroup(self, key: str, st: PodGroupStatus) -> bool:
        # First attempt: the copy the watch delivered (with its resourceVersion); after a
        # conflict, what the API holds now.
        cached = None if self.podgroups.failures(key) else self._cached_podgroup(key)
        try:
            if cached is not None:
                obj: dict[str, Any] = copy.deepcopy(dict(cached))
            else:
                obj = await self._custom.get_namespaced_custom_object(
                    GROUP, VERSION, st.namespace, "podgroups", st.name
                )
            obj["status"] = {
                **(obj.get("status") or {}),
                "phase": st.phase,
                "running": st.running,
                "succeeded": st.succeeded,
                "failed": st.failed,
                "conditions": [c.to_api() for c in st.conditions],
            }
            await send(
                self._custom.replace_namespaced_custom_object,
                GROUP,
                VERSION,
                st.namespace,
                "podgroups",
                st.name,
                obj,
            )
        except API_ERRORS as exc:
            return gives_up(exc)
        return True

    async def _queue(self, name: str, st: QueueStatus) -> bool:
        try:
            await send(
                self._custom.patch_cluster_custom_object_status,
                GROUP,
                VERSION,
                "queues",
                name,
                {"status": {"allocated": st.allocated}},
                _content_type=MERGE_PATCH,
            )
        except API_ERRORS as exc:
            return gives_up(exc)
        return True

    async def _pod(self, key: str, cond: PodCondition) -> bool:
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": cond.reason,
                        "message": cond.message,
                        "lastTransitionTime": format_timestamp(datetime.now(UTC).timestamp()),
                    }
                ]
            }
        }
        try:
            await send(self._core.patch_namespaced_pod_status, cond.name, cond.namespace, patch)
        except API_ERRORS as exc:
            return gives_up(exc)
        self._events.pod(
            cond.namespace,
            cond.name,
            cond.uid,
            type_="Warning",
            reason="FailedScheduling",
            message=cond.message,
        )
        return True
