"""Status writer: PodGroup status, Queue ``status.allocated``, HyperNode ``status.nodeCount`` and
pods' ``PodScheduled``.

Each write happens only when the value changed and goes through a keyed retry queue, where a
newer status for the same object replaces one still waiting; PodGroup and Queue writes also wait
a moment (``coalesce``) before they go, so the statuses of several sessions in a row become one
write per object:

- PodGroup status is a JSON merge patch of ``status`` on the object itself (the PodGroup CRD has
  no status subresource). The scheduler owns that status, so the patch carries no
  resourceVersion: it cannot conflict with other writers' changes to the spec or metadata, and
  it needs no read first.
  When the session placed the job inside a HyperNode, the same patch sets the PodGroup's
  ``volcano.sh/job-allocated-hypernode`` annotation, as Volcano does: no extra request.
- Queue ``status.allocated`` and HyperNode ``status.nodeCount`` are merge patches of the status
  subresource.
- A Kubernetes PodGroup's (``scheduling.k8s.io``) condition is a strategic-merge patch of its
  status subresource (conditions merged by type), as kube-scheduler's ``PatchPodGroupStatus``.
- A pod's ``PodScheduled`` condition (only ever written when the pod could not be scheduled; a
  binding sets it on success) is a strategic-merge patch of ``pods/status`` (conditions are
  merged by type), posted with a ``FailedScheduling`` event carrying the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from caldera.framework.intents import (
    HyperNodeStatus,
    PodCondition,
    PodGroupStatus,
    QueueStatus,
    WorkloadGroupStatus,
)
from caldera.k8s.errors import API_ERRORS, gives_up
from caldera.k8s.resources import HYPERNODES, NODESHARDS, PODGROUPS, PODS, QUEUES
from caldera.k8s.rest import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Resource, Rest
from caldera.models.base import format_timestamp
from caldera.models.volcano import ALLOCATED_HYPERNODE_ANNOTATION
from caldera.models.workload import WORKLOAD_GROUP
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.retry import WorkQueue
from caldera.sharding.shard import ShardStatus

__all__ = ["StatusWriter", "WorkloadWrite"]


@dataclass(frozen=True, slots=True)
class WorkloadWrite:
    """The conditions to set on a Kubernetes PodGroup: (type, status, reason, message) each, at
    the version the server serves it."""

    status: WorkloadGroupStatus
    version: str
    generation: int
    conditions: tuple[tuple[str, str, str, str], ...]


class StatusWriter:
    def __init__(
        self,
        rest: Rest,
        events: EventPoster,
        *,
        workers: int = 16,
        podgroup_coalesce: float = 0.2,
        queue_coalesce: float = 1.0,
    ) -> None:
        self._rest = rest
        self._events = events
        self._podgroup_coalesce = podgroup_coalesce
        self._queue_coalesce = queue_coalesce
        self.podgroups: WorkQueue[str, PodGroupStatus] = WorkQueue(
            "podgroup-status", self._podgroup, workers=workers
        )
        self.queues: WorkQueue[str, QueueStatus] = WorkQueue("queue-status", self._queue, workers=2)
        self.hypernodes: WorkQueue[str, HyperNodeStatus] = WorkQueue(
            "hypernode-status", self._hypernode, workers=2
        )
        self.shards: WorkQueue[str, ShardStatus] = WorkQueue(
            "nodeshard-status", self._shard, workers=1
        )
        self.pods: WorkQueue[str, PodCondition] = WorkQueue(
            "pod-condition", self._pod, workers=workers
        )
        self.workloads: WorkQueue[str, WorkloadWrite] = WorkQueue(
            "workload-podgroup-status", self._workload, workers=2
        )

    def podgroup(self, status: PodGroupStatus) -> None:
        key = f"{status.namespace}/{status.name}"
        self.podgroups.put(key, status, delay=self._podgroup_coalesce)

    def queue(self, status: QueueStatus) -> None:
        self.queues.put(status.name, status, delay=self._queue_coalesce)

    def hypernode(self, status: HyperNodeStatus) -> None:
        self.hypernodes.put(status.name, status, delay=self._queue_coalesce)

    def shard(self, status: ShardStatus) -> None:
        self.shards.put(status.name, status)

    def pod(self, condition: PodCondition) -> None:
        self.pods.put(f"{condition.namespace}/{condition.name}", condition)

    async def _podgroup(self, key: str, st: PodGroupStatus) -> bool:
        patch = {
            "status": {
                "phase": st.phase,
                "running": st.running,
                "succeeded": st.succeeded,
                "failed": st.failed,
                "conditions": [c.to_api() for c in st.conditions],
            }
        }
        if st.hypernode:
            patch["metadata"] = {"annotations": {ALLOCATED_HYPERNODE_ANNOTATION: st.hypernode}}
        failed = await self._patch(PODGROUPS, st.name, patch, namespace=st.namespace)
        return failed is None or gives_up(failed)

    def workload(self, write: WorkloadWrite) -> None:
        """Queue a PodGroup's conditions; one still waiting for the same PodGroup is merged in
        (a later session's verdict replaces a condition of the same type, not the others)."""
        st = write.status
        key = f"{st.namespace}/{st.name}"
        earlier = self.workloads.waiting(key)
        if earlier is not None:
            newer = {c[0] for c in write.conditions}
            kept = tuple(c for c in earlier.conditions if c[0] not in newer)
            write = replace(write, conditions=kept + write.conditions)
        self.workloads.put(key, write, delay=self._podgroup_coalesce)

    async def _workload(self, key: str, write: WorkloadWrite) -> bool:
        now = format_timestamp(datetime.now(UTC).timestamp())
        conditions = [
            {
                "type": t,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "observedGeneration": write.generation,
            }
            for t, status, reason, message in write.conditions
        ]
        resource = Resource(WORKLOAD_GROUP, write.version, "podgroups")
        failed = await self._patch(
            resource,
            write.status.name,
            {"status": {"conditions": conditions}},
            namespace=write.status.namespace,
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        return failed is None or gives_up(failed)

    async def _queue(self, name: str, st: QueueStatus) -> bool:
        patch = {"status": {"allocated": st.allocated}}
        failed = await self._patch(QUEUES, name, patch, subresource="status")
        return failed is None or gives_up(failed)

    async def _shard(self, name: str, st: ShardStatus) -> bool:
        """``UpdateNodeShardStatus``: the nodes this scheduler uses of its NodeShard."""
        status = {
            "lastUpdateTime": format_timestamp(datetime.now(UTC).timestamp()),
            "nodesInUse": list(st.nodes_in_use),
            "nodesToRemove": list(st.nodes_to_remove),
            "nodesToAdd": list(st.nodes_to_add),
        }
        failed = await self._patch(NODESHARDS, name, {"status": status}, subresource="status")
        return failed is None or gives_up(failed)

    async def _hypernode(self, name: str, st: HyperNodeStatus) -> bool:
        patch = {"status": {"nodeCount": st.node_count}}
        failed = await self._patch(HYPERNODES, name, patch, subresource="status")
        return failed is None or gives_up(failed)

    async def _pod(self, key: str, cond: PodCondition) -> bool:
        status: dict[str, Any] = {
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
        if cond.nominated:  # taskUnschedulable: an empty nomination leaves the old one
            status["nominatedNodeName"] = cond.nominated
        patch = {"status": status}
        failed = await self._patch(
            PODS,
            cond.name,
            patch,
            namespace=cond.namespace,
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
        if failed is not None:
            return gives_up(failed)
        self._events.pod(
            cond.namespace,
            cond.name,
            cond.uid,
            type_="Warning",
            reason="FailedScheduling",
            message=cond.message,
        )
        return True

    async def _patch(
        self,
        resource: Resource,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
    ) -> BaseException | None:
        """One status patch; the failure, if it failed."""
        try:
            await self._rest.call(
                "patch",
                resource,
                namespace=namespace,
                name=name,
                subresource=subresource,
                body=body,
                content_type=content_type,
            )
        except API_ERRORS as exc:
            return exc
        return None
