"""A node's utilisation as Volcano's sharding controller measures it, and when it counts as changed.

The sharding controller does not ask a metrics server: it adds up the requests of the pods bound to
the node and divides by the node's *capacity* (not its allocatable), as
``pkg/controllers/sharding/node_utilization.go`` does:

- ``listPodsOnNode``: every pod whose ``spec.nodeName`` is the node, except pods that have
  finished (``Succeeded``, ``Failed``) and mirror pods (annotation
  ``kubernetes.io/config.mirror``);
- ``calculateMetricsFromPodsAndNode``: the requests of the app containers only (no init
  containers, no overhead), cpu in millicores and memory in bytes, each utilisation capped at 1
  and 0 when the node reports no capacity; the node is a warm-up node when labelled
  ``node.volcano.sh/warmup=true``.

What makes the controller re-run the assignment (``event_handlers.go``: a utilisation moving by
more than half; ``node_events.go``: labels, annotations or cpu capacity changing; ``pod_events.go``:
a container's requests changing) is here too, for the operator to decide when to recompute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from caldera.models.core import Node, Pod
from caldera.quantity import CPU
from caldera.sharding.assign_policies import WARMUP_LABEL, WARMUP_LABEL_VALUE

__all__ = [
    "MIRROR_POD_ANNOTATION",
    "NODE_USAGE_CHANGE_THRESHOLD",
    "NodeMetrics",
    "active_pods",
    "node_changed",
    "node_metrics",
    "pod_resources_changed",
    "utilization_changed",
]

_MEMORY = "memory"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_USAGE_CHANGE_THRESHOLD = 0.5
"""``nodeUsageChangeThreshold``."""
_FINISHED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    """``NodeMetrics``, the part the assignment and its triggers read."""

    name: str
    cpu_utilization: float
    """Requested cpu over cpu capacity, in [0, 1]."""
    memory_utilization: float
    is_warmup_node: bool
    pod_count: int
    cpu_requested: float = 0.0
    """Millicores."""
    memory_requested: float = 0.0
    """Bytes."""


def active_pods(pods: Iterable[Pod]) -> list[Pod]:
    """``listPodsOnNode``'s filter over the pods bound to one node."""
    return [
        pod
        for pod in pods
        if pod.status.phase not in _FINISHED
        and MIRROR_POD_ANNOTATION not in pod.metadata.annotations
    ]


def _ratio(requested: float, capacity: float) -> float:
    if capacity <= 0:
        return 0.0
    return min(requested / capacity, 1.0)


def node_metrics(node: Node, pods: Iterable[Pod]) -> NodeMetrics:
    """``calculateNodeUtilization``: the metrics of ``node`` given the pods bound to it (all of
    them; finished and mirror pods are left out here)."""
    counted = active_pods(pods)
    cpu = memory = 0.0
    for pod in counted:
        for container in pod.spec.containers:
            cpu += container.resources.requests.get(CPU, 0.0)
            memory += container.resources.requests.get(_MEMORY, 0.0)
    capacity = node.status.capacity
    labels = node.metadata.labels
    return NodeMetrics(
        name=node.metadata.name,
        cpu_utilization=_ratio(cpu, capacity.get(CPU, 0.0)),
        memory_utilization=_ratio(memory, capacity.get(_MEMORY, 0.0)),
        is_warmup_node=labels.get(WARMUP_LABEL) == WARMUP_LABEL_VALUE,
        pod_count=len(counted),
        cpu_requested=cpu,
        memory_requested=memory,
    )


def utilization_changed(old: NodeMetrics | None, new: NodeMetrics) -> bool:
    """``isUtilizationSignificantlyChanged``: a node not measured before, or cpu or memory
    utilisation moved by more than 0.5; the only change that makes Volcano re-run the
    assignment from an event (the periodic sync re-runs it anyway)."""
    if old is None:
        return True
    return (
        abs(new.cpu_utilization - old.cpu_utilization) > NODE_USAGE_CHANGE_THRESHOLD
        or abs(new.memory_utilization - old.memory_utilization) > NODE_USAGE_CHANGE_THRESHOLD
    )


def node_changed(old: Node, new: Node) -> bool:
    """``isNodeSignificantlyChanged``: labels or annotations differ, or the cpu capacity in whole
    cores (``Value()``, rounded up) moved by more than half of ``old + 1``; then Volcano measures
    the node again."""
    if (
        old.metadata.labels != new.metadata.labels
        or old.metadata.annotations != new.metadata.annotations
    ):
        return True
    old_cores = math.ceil(old.status.capacity.get(CPU, 0.0) / 1000)
    new_cores = math.ceil(new.status.capacity.get(CPU, 0.0) / 1000)
    return abs(new_cores - old_cores) / (old_cores + 1) > NODE_USAGE_CHANGE_THRESHOLD


def pod_resources_changed(old: Pod, new: Pod) -> bool:
    """``podResourcesChanged``: a container added or removed, or one's cpu or memory request
    changed (compared position by position)."""
    if len(old.spec.containers) != len(new.spec.containers):
        return True
    for before, after in zip(old.spec.containers, new.spec.containers, strict=True):
        was, now = before.resources.requests, after.resources.requests
        for resource in (CPU, _MEMORY):
            if was.get(resource, 0.0) != now.get(resource, 0.0):
                return True
    return False
