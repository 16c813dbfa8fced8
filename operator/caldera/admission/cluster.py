"""What the rules look up in the cache: a queue's children, ancestors and placed pods.

Volcano's webhook reads these from its informers' listers; Caldera's from the scheduler's cache,
which every replica keeps (standby replicas included), so a webhook answers without asking the
API server.
"""

from __future__ import annotations

from caldera.cache.state import ClusterState
from caldera.models.core import FINISHED_PHASES
from caldera.models.volcano import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, Queue

__all__ = ["ROOT", "children", "not_found", "placed_pods"]

ROOT = "root"


def not_found(name: str) -> str:
    """The lister's NotFound text."""
    return f'queue.scheduling.volcano.sh "{name}" not found'


def children(state: ClusterState, name: str) -> list[Queue]:
    """Queues whose ``spec.parent`` is ``name`` (Volcano's ``queueParent`` index), by name."""
    return [q for _, q in sorted(state.queues.items()) if q.spec.parent == name]


def placed_pods(state: ClusterState, queue: str, default_queue: str) -> int:
    """Pods of ``queue``'s jobs that hold a node: Volcano's ``status.allocated.pods``, taken from
    the queue's status when a scheduler wrote it there, else counted from the cached pods."""
    cached = state.queues.get(queue)
    if cached is not None and "pods" in cached.status.allocated:
        return int(cached.status.allocated["pods"])
    count = 0
    for pod in state.pods.values():
        if not pod.spec.node_name or pod.status.phase in FINISHED_PHASES:
            continue
        notes = pod.metadata.annotations
        group = notes.get(GROUP_NAME_ANNOTATION)
        podgroup = state.podgroups.get(f"{pod.metadata.namespace}/{group}") if group else None
        name = podgroup.spec.queue if podgroup else notes.get(QUEUE_NAME_ANNOTATION, "")
        if (name or default_queue) == queue:
            count += 1
    return count
