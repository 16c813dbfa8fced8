"""What the snapshot derives from each object version, kept between builds.

The watched objects are immutable and replaced whenever they change, so what a build derives
from one object version (a pod's requests and request vector, the fields of its task, the
in-memory group a bare pod makes, the node table's static columns) is the same at every build
that sees that version. An operator passes one :class:`BuildMemo` to every build: each session
then works out only the objects that changed since the last one, and makes the session's own
mutable objects (tasks, jobs, the node accounting) from the kept pieces, with no parsing, no
quantity arithmetic and no per-node numpy call. A build with a fresh memo gives the same snapshot
(a test compares the two over random change streams).

Vectors kept here are shared by the snapshots of many sessions and are made read-only, so a
session that tried to change one in place would fail at once instead of leaking into the next.
Everything kept belongs to one resource space: when the space changes (a new resource name), the
vectors are made again.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from caldera.api.resources import PODS, ResourceSpace, Vector
from caldera.api.task import TaskStatus
from caldera.cache.kept import KeptJobs, same_objects, same_parts
from caldera.models.base import OwnerReference
from caldera.models.core import Node, Pod, PodSpec, effective_requests, nonzero_requests
from caldera.models.volcano import (
    GROUP_OWNER_KINDS,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    TASK_SPEC_KEY,
    NetworkTopologySpec,
    topology_from_annotations,
)
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

__all__ = [
    "BuildMemo",
    "Implicit",
    "NodeBase",
    "PodEntry",
    "PodFacts",
    "frozen",
    "stable_uid",
    "task_status",
]


def stable_uid(kind: str, key: str) -> str:
    """A deterministic UID for objects that have none (manifests written by hand)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"caldera:{kind}/{key}"))


def frozen(vector: Vector) -> Vector:
    """``vector``, read-only from now on (it is shared between sessions)."""
    vector.flags.writeable = False
    return vector


def _without_pod_slot(resreq: Vector, space: ResourceSpace) -> Vector:
    out = resreq.copy()
    out[space.index[PODS]] -= 1.0
    return out


def task_status(pod: Pod) -> TaskStatus:
    """Volcano's task state of a pod (``getTaskStatus``)."""
    phase = pod.status.phase
    deleting = pod.metadata.deletion_timestamp is not None
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if pod.spec.node_name else TaskStatus.PENDING
    return {
        "Succeeded": TaskStatus.SUCCEEDED,
        "Failed": TaskStatus.FAILED,
    }.get(phase, TaskStatus.UNKNOWN)


@dataclass(slots=True, eq=False)
class PodFacts:
    """What the snapshot derives from a pod's spec (never changed once made: not frozen only
    because a frozen dataclass costs ten times as much to make, once per pod version)."""

    requests: dict[str, float]
    nonzero: tuple[float, float]
    """(milli-cpu, memory) with kube-scheduler's defaults for scoring."""


@dataclass(slots=True, eq=False)
class Implicit:
    """The in-memory group a bare pod makes (before the state it depends on is looked up);
    equal only to itself (one per pod version). Never changed once made; like the other
    per-pod records here it is not a frozen dataclass, which costs ten times as much to make."""

    name: str
    """``podgroup-<controller UID, else pod UID>``."""
    key: str
    """``<namespace>/<name>``."""
    owner: OwnerReference | None
    """The controller whose ``group-min-member`` sets the group's size, if one of the kinds
    that carry it."""
    queue: str
    """The ``queue-name`` annotation ("" for the default queue)."""
    min_resources: Vector | None
    """The group's minResources (a bare pod's own requests; none for a Kubernetes PodGroup)."""
    topology: NetworkTopologySpec | None
    topology_problem: str
    """Why the pod's ``networkTopology`` annotations were ignored ("" if they were not)."""


@dataclass(slots=True)
class PodEntry:
    """One pod version and what was derived from it."""

    pod: Pod
    facts: PodFacts
    space: ResourceSpace | None = None
    """The space ``head``, ``before`` and ``after`` were made in (None: not yet)."""
    head: tuple[str, str, str] = ("", "", "")
    """(uid, namespace, name) of the task."""
    before: tuple[TaskStatus, Vector, float, float] | None = None
    """(status, request vector, nonzero cpu, nonzero memory)."""
    after: tuple[float, PodSpec, dict[str, str], dict[str, str], bool, bool, str] | None = None
    """(creation, spec, labels, annotations, best effort, preemptable, role)."""
    started: float = 0.0
    controller: OwnerReference | None = None
    implicit: Implicit | None = None
    group: object = None
    """The last in-memory group this pod described as its first pod (reused while the same)."""
    outcome: object = None
    """What the last build made of this pod (:class:`caldera.cache.outcome.Outcome`)."""


@dataclass(slots=True, eq=False)
class NodeBase:
    """The static columns of the node table, for one set of node versions in one space (equal
    only to itself)."""

    nodes: dict[str, Node]
    space: ResourceSpace
    managed: frozenset[str]
    scope: Scope
    outside: Vector
    """The allocatable of the Ready nodes left out for ``scope`` that still count for the queues
    (a hash split's other instances' nodes; zeros otherwise)."""
    ready: list[Node]
    names: list[str]
    allocatable: Vector
    labels: list[dict[str, str]]
    withheld: list[dict[str, float]] | None
    capacity: list[Mapping[str, float]]
    images: list[dict[str, int]]
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(node, message) to report at every build."""
    static: dict[object, Any] = field(default_factory=dict)
    """What plugins derived from these nodes' static columns (:meth:`NodeTable.derived`)."""
    rows: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    """The Ready nodes' names in row order, and every node's name: the same object as the last
    node set's while they are the same names (a cordon, a label or an allocatable changes no
    row, and no pod comes to be bound to a node that is gone)."""
    template: Any = None
    """A :class:`~caldera.api.node.NodeTable` of these nodes with nothing on it, whose
    :meth:`~caldera.api.node.NodeTable.fresh` copies each build's table starts from."""


class BuildMemo:
    """The pieces kept between builds (see the module's docstring). Pods gone from the state are
    forgotten after each build."""

    __slots__ = (
        "_context",
        "_entries",
        "_names",
        "_node_names",
        "_space",
        "kept",
        "nodes",
        "workload_groups",
    )

    def __init__(self) -> None:
        self._entries: dict[str, PodEntry] = {}
        self._names: dict[str, int] = {}
        """How many kept pods request each resource name."""
        self._space: ResourceSpace | None = None
        self.nodes: NodeBase | None = None
        self._context: tuple[object, tuple[object, ...], dict[str, object]] | None = None
        self._node_names: tuple[dict[str, Node], frozenset[str]] = ({}, frozenset())
        self.kept = KeptJobs()
        """Jobs of the last build, taken over while nothing about them changed."""
        self.workload_groups: dict[str, tuple[object, object]] = {}
        """Kubernetes PodGroup key → (its object, the group the last build made of it): the same
        group while the object and its queue are the same, so its job can be taken over."""

    @property
    def entries(self) -> Mapping[str, PodEntry]:
        """Pod key → its entry (every pod of the state once :meth:`entry` has seen it)."""
        return self._entries

    def entry(self, key: str, pod: Pod) -> PodEntry:
        hit = self._entries.get(key)
        if hit is not None and hit.pod is pod:
            return hit
        if hit is not None:
            self._count(hit.facts.requests, -1)
        facts = PodFacts(effective_requests(pod.spec), nonzero_requests(pod.spec))
        self._count(facts.requests, 1)
        entry = self._entries[key] = PodEntry(pod, facts)
        return entry

    def _count(self, requests: Mapping[str, float], delta: int) -> None:
        names = self._names
        for name in requests:
            left = names.get(name, 0) + delta
            if left > 0:
                names[name] = left
            else:
                names.pop(name, None)  # no pod asks for it any more

    def node_resource_names(self, nodes: Mapping[str, Node]) -> frozenset[str]:
        """Every resource name some node has, worked out again only when a node changed."""
        kept, names = self._node_names
        if not same_objects(kept, nodes):
            names = frozenset(name for node in nodes.values() for name in node.allocatable)
            self._node_names = (dict(nodes), names)
        return names

    def request_names(self) -> Iterable[str]:
        """Every resource name some kept pod requests."""
        return self._names.keys()

    def space(self, names: Iterable[str], unfitted: frozenset[str] = frozenset()) -> ResourceSpace:
        """The resource space of ``names`` (``unfitted``: see :attr:`ResourceSpace.unfitted`):
        the one of the last build when they are the same (so the kept vectors still fit it)."""
        space = ResourceSpace(names, unfitted)
        last = self._space
        if last is not None and last.names == space.names and last.unfitted == space.unfitted:
            return last
        self._space = space
        return space

    def task_parts(self, entry: PodEntry, space: ResourceSpace) -> PodEntry:
        """``entry`` with its task's fields made in ``space`` (once per pod version)."""
        if entry.space is space:
            return entry
        pod, facts = entry.pod, entry.facts
        meta, spec = pod.metadata, pod.spec
        requests = facts.requests
        resreq = space.vector(requests)
        resreq[space.index[PODS]] += 1.0
        preemptable = meta.annotations.get(PREEMPTABLE_KEY, meta.labels.get(PREEMPTABLE_KEY))
        entry.head = (
            meta.uid or stable_uid("Pod", f"{meta.namespace}/{meta.name}"),
            meta.namespace,
            meta.name,
        )
        entry.before = (task_status(pod), frozen(resreq), facts.nonzero[0], facts.nonzero[1])
        entry.after = (
            meta.creation_timestamp or 0.0,
            spec,
            meta.labels,  # the record's own: nothing changes a task's labels or annotations
            meta.annotations,
            not any(v for n, v in requests.items() if n != PODS),
            preemptable != "false",
            meta.annotations.get(TASK_SPEC_KEY, meta.labels.get(TASK_SPEC_KEY, "")),
        )
        entry.started = pod.status.start_time or 0.0
        entry.controller = next((o for o in meta.owner_references if o.controller), None)
        entry.implicit = None  # its vector was made in the old space
        entry.space = space
        return entry

    def implicit(self, entry: PodEntry, space: ResourceSpace) -> Implicit:
        """The in-memory group ``entry``'s bare pod makes (once per pod version)."""
        self.task_parts(entry, space)
        if entry.implicit is not None:
            return entry.implicit
        assert entry.before is not None
        pod = entry.pod
        meta = pod.metadata
        owner = next((o for o in meta.owner_references if o.controller and o.uid), None)
        topology = topology_from_annotations(meta.annotations)
        name = f"podgroup-{owner.uid if owner else meta.uid}"
        entry.implicit = Implicit(
            name=name,
            key=f"{meta.namespace}/{name}",
            owner=(
                owner
                if owner is not None and (owner.api_version, owner.kind) in GROUP_OWNER_KINDS
                else None
            ),
            queue=meta.annotations.get(QUEUE_NAME_ANNOTATION) or "",
            # the pod's requests: its request vector without the pod slot the task adds
            min_resources=frozen(_without_pod_slot(entry.before[1], space)),
            topology=None if isinstance(topology, str) else topology,
            topology_problem=topology if isinstance(topology, str) else "",
        )
        return entry.implicit

    def context(self, parts: tuple[object, ...], podgroups: Mapping[str, object]) -> object:
        """A token for what a pod's place in the snapshot depends on besides the pod: the same
        object as the last build's while ``parts`` are equal (each the same object, or equal)
        and ``podgroups`` holds the same objects; a new one otherwise."""
        last = self._context
        if last is not None:
            token, old, groups = last
            if same_parts(old, parts) and same_objects(groups, podgroups):
                return token
        token = object()
        self._context = (token, parts, dict(podgroups))
        return token

    def forget(self, key: str) -> None:
        """Drop the entry of a pod that is gone."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._count(entry.facts.requests, -1)

    def keep_only(self, keys: Collection[str]) -> None:
        for gone in self._entries.keys() - keys:
            self._count(self._entries.pop(gone).facts.requests, -1)

    def same_nodes(
        self,
        nodes: Mapping[str, Node],
        space: ResourceSpace,
        managed: frozenset[str],
        scope: Scope = WHOLE_CLUSTER,
    ) -> bool:
        """The kept node columns are those of ``nodes`` in ``space``, for ``scope``."""
        base = self.nodes
        if base is None or base.space is not space or base.managed != managed:
            return False
        if base.scope != scope:
            return False
        return same_objects(base.nodes, nodes)
