"""A task is one pod as the scheduler sees it, with Volcano's task states.

Tasks are created fresh for every snapshot and mutated only inside one session. The pod's
scheduling constraints stay on the frozen pod spec model; the task adds the numbers the engine uses
on the hot path (request vector, priority, state, node).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from caldera.api.resources import Vector
from caldera.models.base import OwnerReference
from caldera.models.core import Pod, PodSpec
from caldera.models.volcano import QUEUE_ALLOCATION_GATE

__all__ = [
    "ALLOCATED_STATUSES",
    "Gate",
    "NodeLock",
    "Task",
    "TaskStatus",
    "Transaction",
    "gate_of",
    "has_queue_gate",
    "without_queue_gate",
]


class TaskStatus(enum.Enum):
    """Volcano's task states (api/types.go), in its declaration order."""

    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    def __str__(self) -> str:
        return self.value

    # Members are singletons compared by identity, so identity hashing agrees with equality;
    # Enum's own __hash__ is Python code, and tasks are looked up by state millions of times.
    __hash__ = object.__hash__


class Gate(enum.Enum):
    """Where a pending pod stands with its scheduling gates (``spec.schedulingGates``)."""

    NONE = "none"
    """No gate, and not one that opted into queue admission."""
    OTHER = "other"
    """Held by a gate that is not the scheduler's to lift: never placed while it lasts."""
    QUEUE = "queue"
    """Held only by the queue-allocation gate, which the scheduler lifts once its queue has room
    for it."""
    LIFTED = "lifted"
    """Opted into queue admission and no gate left: until it is placed it holds its share of the
    queue (a reservation), so that lifting never admits more than the queue can take."""

    __hash__ = object.__hash__


ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
"""States in which a task holds resources on a node (Volcano's ``AllocatedStatus``)."""


@dataclass(frozen=True, slots=True)
class NodeLock:
    """HAMi's node lock, taken before the pod's device annotations and binding are written and
    released by the device plugin once it has handed the cards to the container."""

    timeout: float
    """Seconds after which another pod's lock counts as stale and is taken over."""
    key: str = "hami.io/mutex.lock"
    bare: bool = False
    """The value is the time alone (Cambricon's ``cambricon.com/dsmlu.lock``); such a lock
    names no pod, so it is released whoever took it, as HAMi's ``ReleaseNodeLock`` does."""


@dataclass(slots=True, frozen=True)
class Transaction:
    """The last placement a session tried for a task, kept after a gang discard so the PodGroup
    condition can tell 'could be placed, waiting for the gang' from 'does not fit'."""

    status: TaskStatus
    node: str
    eviction_occurred: bool = False
    """It was pipelined there after evicting pods (Volcano's ``EvictionOccurred``)."""


@dataclass(slots=True, eq=False)
class Task:
    uid: str
    namespace: str
    name: str
    job: str
    status: TaskStatus
    resreq: Vector
    """Effective request (kube-scheduler's PodRequests) plus one ``pods`` slot."""
    nonzero_cpu: float
    nonzero_memory: float
    priority: int
    creation: float
    spec: PodSpec
    labels: dict[str, str]
    annotations: dict[str, str]
    best_effort: bool
    """True when the pod requests no cpu, memory or other resource (only its pod slot)."""
    preemptable: bool = True
    role: str = ""
    node: int = -1
    """Index into the snapshot's node table, or -1."""
    node_name: str = ""
    last_transaction: Transaction | None = None
    bind_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations plugins want on the pod before its binding (e.g. device assignments)."""
    started: float = 0.0
    """Seconds since the epoch when the pod started on its node (0: not known)."""
    node_lock: NodeLock | None = None
    """The node lock to hold while those annotations and the binding are written."""
    controller: OwnerReference | None = None
    """The pod's controller (its owner reference marked ``controller``), if any."""
    gate: Gate = Gate.NONE
    reserved: bool = False
    """It holds a reservation in its queue (see :attr:`Gate.LIFTED`), released when placed."""
    nominated: str = ""
    """The pod's ``status.nominatedNodeName``: where an earlier preemption made room for it."""
    preempted: bool = False
    """The pod is terminating because a scheduler preempted it (``podTerminatingByPreemption``:
    a deletion timestamp and ``DisruptionTarget=True`` for ``PreemptionByScheduler``)."""
    eviction_occurred: bool = False
    """Pipelined in this session after evicting pods for it (Volcano's ``EvictionOccurred``):
    its pod is then nominated to that node."""

    @property
    def gated(self) -> bool:
        """A gate still holds it: it is counted in its job and queue but never placed."""
        return self.gate is Gate.OTHER or self.gate is Gate.QUEUE

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def gate_of(spec: PodSpec, annotations: Mapping[str, str], pending: bool) -> Gate:
    """The pod's :class:`Gate`: Volcano's ``SchGated`` with ``HasOnlyVolcanoSchedulingGate`` and
    ``HasQueueAllocationGateAnnotation`` (the opt-in annotation set to ``"true"``)."""
    opted = annotations.get(QUEUE_ALLOCATION_GATE, "").lower() == "true"
    gates = spec.scheduling_gates
    if not gates:
        return Gate.LIFTED if opted and pending else Gate.NONE
    if opted and all(g.name == QUEUE_ALLOCATION_GATE for g in gates):
        return Gate.QUEUE
    return Gate.OTHER


def has_queue_gate(spec: PodSpec) -> bool:
    """The pod still carries the queue-allocation scheduling gate."""
    return any(g.name == QUEUE_ALLOCATION_GATE for g in spec.scheduling_gates)


def without_queue_gate(pod: Pod) -> Pod:
    """``pod`` as it is once its queue-allocation gate is lifted (its other gates stay)."""
    left = tuple(g for g in pod.spec.scheduling_gates if g.name != QUEUE_ALLOCATION_GATE)
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"scheduling_gates": left})})
