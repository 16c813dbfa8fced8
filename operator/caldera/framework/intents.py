"""What a session decided, as plain data for the I/O shell (or the simulator) to carry out.

The engine never calls the API. A session returns a :class:`CycleResult`; the operator turns its
intents into binds, evictions and status writes, and ``caldera simulate`` applies them to its
in-memory cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caldera.api.hypernode import TopologyTrace
from caldera.api.task import NodeLock
from caldera.models.volcano import PodGroupCondition
from caldera.sharding.shard import ShardStatus

__all__ = [
    "Bind",
    "ClaimReservation",
    "CycleResult",
    "Event",
    "Evict",
    "GateLift",
    "PodCondition",
    "PodGroupStatus",
    "QueueStatus",
    "VolumeBind",
    "WorkloadGroupStatus",
]


@dataclass(frozen=True, slots=True)
class VolumeBind:
    """A volume decision the binder carries out before the pod's binding (VolumeBinding's
    PreBind): bind claim ``namespace/claim`` to the PersistentVolume ``volume`` (its ``claimRef``
    is set), or, when ``volume`` is empty, have the claim provisioned on the bind's node (the
    ``volume.kubernetes.io/selected-node`` annotation). Resource versions make the writes fail
    if the objects changed since the session saw them."""

    namespace: str
    claim: str
    claim_uid: str = ""
    claim_resource_version: str = ""
    volume: str = ""
    volume_resource_version: str = ""
    prebound: bool = False
    """The volume already names this claim (pre-bound by its author), so it is not marked
    ``pv.kubernetes.io/bound-by-controller``."""


@dataclass(frozen=True, slots=True)
class ClaimReservation:
    """A ResourceClaim write the binder carries out before the pod's binding (DynamicResources'
    PreBind): the claim's ``status.allocation`` (when the session allocated it) and its
    ``status.reservedFor`` with the pod added, in one status update guarded by the resource
    version the session saw."""

    namespace: str
    claim: str
    claim_uid: str = ""
    claim_resource_version: str = ""
    allocation: dict[str, Any] | None = None
    """The allocation as the API writes it; None when the claim was allocated already."""
    reserved_for: tuple[tuple[str, str], ...] = ()
    """(pod name, pod uid) of every consumer after the write."""


@dataclass(frozen=True, slots=True)
class Bind:
    namespace: str
    name: str
    uid: str
    node: str
    annotations: dict[str, str] = field(default_factory=dict)
    volumes: tuple[VolumeBind, ...] = ()
    """Volume bindings and provisioning requests to write before the binding."""
    claims: tuple[ClaimReservation, ...] = ()
    """ResourceClaim allocations and reservations to write before the binding."""
    node_lock: NodeLock | None = None
    """Take this lock on the node before writing the annotations (shared devices)."""
    recheck: bool = False
    """The node is another scheduler's too (soft sharding): check with the API server that the
    pod still fits there before binding."""


@dataclass(frozen=True, slots=True)
class Evict:
    namespace: str
    name: str
    uid: str
    reason: str
    preemptor: str = ""
    """``namespace/name`` of the pod the victim makes room for (empty: none)."""


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    namespace: str
    name: str
    phase: str
    running: int
    succeeded: int
    failed: int
    conditions: tuple[PodGroupCondition, ...]
    changed: bool
    """Differs from what the API holds (ignoring condition times and transition IDs)."""
    hypernode: str = ""
    """The HyperNode the job was placed in, for the ``volcano.sh/job-allocated-hypernode``
    annotation ("" leaves the annotation alone)."""


@dataclass(frozen=True, slots=True)
class WorkloadGroupStatus:
    """What a Kubernetes PodGroup's status says after a session, as kube-scheduler writes it
    (``submitPodGroupAlgorithmResult``): scheduled (reason ``Scheduled``) once minCount of its
    pods are bound, else why not (``Unschedulable``); ``disrupted`` when the session evicts
    some of its pods (``DisruptionTarget``, ``PreemptionByScheduler``)."""

    namespace: str
    name: str
    scheduled: bool
    reason: str
    message: str
    disrupted: str = ""


@dataclass(frozen=True, slots=True)
class HyperNodeStatus:
    """A HyperNode's ``status.nodeCount``, written when it differs from the API's."""

    name: str
    node_count: int


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    allocated: dict[str, str]
    changed: bool


@dataclass(frozen=True, slots=True)
class PodCondition:
    """The pod's ``PodScheduled`` condition (always status False here: not yet placed)."""

    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    held: bool = False
    """The pod is not considered at all until something else changes (its PodGroup or queue is
    missing or invalid): often a moment's race at creation, so the operator says it only once
    it has lasted."""
    nominated: str = ""
    """The node the pod is nominated to (``status.nominatedNodeName``): pods were evicted there
    for it. Empty leaves the pod's nomination as it is, as Volcano's ``taskUnschedulable``."""


@dataclass(frozen=True, slots=True)
class GateLift:
    """Take the queue-allocation gate off a pod: its queue has room for it now."""

    namespace: str
    name: str
    uid: str
    queue: str


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class CycleResult:
    session_id: str
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    podgroups: list[PodGroupStatus] = field(default_factory=list)
    workload_groups: list[WorkloadGroupStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    pod_conditions: list[PodCondition] = field(default_factory=list)
    gate_lifts: list[GateLift] = field(default_factory=list)
    gate_waits: dict[str, str] = field(default_factory=dict)
    """Pod → why its queue-allocation gate stays this session (``explain`` and ``simulate``)."""
    hypernodes: list[HyperNodeStatus] = field(default_factory=list)
    shard_status: ShardStatus | None = None
    """The status to write on this scheduler's NodeShard (None: none changed)."""
    topology: dict[str, TopologyTrace] = field(default_factory=dict)
    """Job → its HyperNode search this session (``caldera explain`` shows it)."""
    events: list[Event] = field(default_factory=list)
    deserved: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per-queue fair share computed this session (for reports and metrics)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per phase: ``open``, each action, ``close``."""
    snapshot: tuple[str, float] = ("", 0.0)
    """How the operator's model made the session's snapshot (``full`` or ``changes``) and the
    seconds it took (empty for other callers)."""
    calls: dict[str, int] = field(default_factory=dict)
    """Calls to systems outside the cluster (extenders), by ``"<hook> <outcome>"``."""
    preemption_attempts: int = 0
    """Tasks preempt and reclaim tried to make room for."""
    preemption_notes: dict[str, str] = field(default_factory=dict)
    """Pod → why preempt or reclaim evicted nothing for it (``caldera explain`` says it)."""
    traced_nodes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """For the pod the session traces (``Session.traced``, ``caldera explain``): node → the
    (filter, reason) pairs its message counts against that node, as the session last saw it."""
    traced_notes: dict[str, str] = field(default_factory=dict)
    """For the traced pod: node → what a plugin adds to its refusal there, as the pod was last
    tried (deviceshare: each card tried and why it refused)."""
    preemption_nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    """Pod → node → why preempt or reclaim could not make room for it there (the nodes it
    tried, at most :data:`~caldera.actions._walk.NODES_NOTED` of them)."""
