"""Keyword builders for test objects and a one-call scenario runner.

Objects are built as the raw dicts an API server or manifest would hold and validated through the
same models the product uses, so tests exercise the real boundary. ``scenario()`` runs the real
simulator (snapshot → session → actions → close) on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from caldera.cache.state import ClusterState
from caldera.framework.policy import Policy, default_policy, load_policy
from caldera.framework.registry import Registry
from caldera.models.core import Node, Pod, PriorityClass
from caldera.models.parse import parse_object
from caldera.models.volcano import PodGroup, Queue
from caldera.simulate.report import report
from caldera.simulate.runner import Simulation, simulate

REGISTRY = Registry.from_entry_points()
Obj = Pod | Node | PodGroup | Queue | PriorityClass


def _meta(name: str, namespace: str | None, created: float | None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **{k: v for k, v in extra.items() if v}}
    if namespace is not None:
        meta["namespace"] = namespace
    if created is not None:
        meta["creationTimestamp"] = created
    return meta


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
) -> Node:
    raw = {
        "kind": "Node",
        "metadata": _meta(name, None, None, labels=dict(labels or {})),
        "spec": {"unschedulable": unschedulable, "taints": list(taints)},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    return _parse("Node", raw)


def pod(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    extra: Mapping[str, str] | None = None,
    scheduler: str = "volcano",
    node_name: str = "",
    phase: str | None = None,
    priority: int | None = None,
    priority_class: str = "",
    created: float | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    init_containers: Iterable[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
) -> Pod:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
        "nodeName": node_name,
        "tolerations": list(tolerations),
        "initContainers": list(init_containers),
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if overhead:
        spec["overhead"] = dict(overhead)
    raw = {
        "kind": "Pod",
        "metadata": _meta(name, namespace, created, labels=dict(labels or {}), annotations=ann),
        "spec": spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }
    return _parse("Pod", raw)


def podgroup(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    queue: str = "default",
    min_resources: Mapping[str, str] | None = None,
    priority_class: str = "",
    phase: str = "Pending",
    created: float | None = None,
    annotations: Mapping[str, str] | None = None,
    min_task_member: Mapping[str, int] | None = None,
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = dict(min_task_member)
    raw = {
        "kind": "PodGroup",
        "metadata": _meta(name, namespace, created, annotations=dict(annotations or {})),
        "spec": spec,
        "status": {"phase": phase},
    }
    return _parse("PodGroup", raw)


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    state: str = "Open",
    priority: int = 0,
    parent: str = "",
    created: float | None = None,
) -> Queue:
    spec: dict[str, Any] = {"weight": weight, "priority": priority}
    if capability is not None:
        spec["capability"] = dict(capability)
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if parent:
        spec["parent"] = parent
    raw = {
        "kind": "Queue",
        "metadata": _meta(name, None, created),
        "spec": spec,
        "status": {"state": state},
    }
    return _parse("Queue", raw)


def priority_class(name: str, value: int, *, default: bool = False) -> PriorityClass:
    raw = {
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
    return _parse("PriorityClass", raw)


def _parse(kind: str, raw: dict[str, Any]) -> Any:
    obj = parse_object(kind, raw)
    if isinstance(obj, Pod | Node | PodGroup | Queue | PriorityClass):
        return obj
    raise AssertionError(f"test object does not validate: {obj}")


def policy(text: str | None = None) -> Policy:
    return default_policy(REGISTRY) if text is None else load_policy(text, REGISTRY)


def state_of(objects: Iterable[Obj]) -> ClusterState:
    state = ClusterState()
    for i, obj in enumerate(objects):
        if obj.metadata.creation_timestamp is None:
            meta = obj.metadata.model_copy(update={"creation_timestamp": 1_700_000_000.0 + i})
            obj = obj.model_copy(update={"metadata": meta})
        state.add(obj)
    if "default" not in state.queues:
        state.add(queue("default", created=1_600_000_000.0))
    return state


def scenario(
    objects: Iterable[Obj],
    *,
    policy_yaml: str | None = None,
    cycles: int = 1,
    scheduler_names: Iterable[str] = ("volcano",),
) -> Simulation:
    """Run the simulator on ``objects`` (a ``default`` queue is added if missing)."""
    return simulate(
        state_of(objects),
        policy(policy_yaml),
        REGISTRY,
        scheduler_names=scheduler_names,
        cycles=cycles,
    )


def binds(sim: Simulation) -> dict[str, str]:
    """``{"ns/pod": node}`` for every bind in the run."""
    return {f"{b.namespace}/{b.name}": b.node for rec in sim.cycles for b in rec.result.binds}


def summary(sim: Simulation) -> dict[str, Any]:
    """The ``--output json`` document of the run."""
    return report(sim)
