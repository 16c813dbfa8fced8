"""Core Kubernetes kinds the scheduler reads: Pod, Node, PriorityClass, Namespace, ResourceQuota,
ConfigMap.

They are slim records (``models/record.py``): only the fields scheduling needs are modelled;
everything else is skipped while decoding. Pod requests are
computed here exactly as kube-scheduler computes them, because every later decision depends on them.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from caldera.models.base import ObjectMeta
from caldera.models.names import is_label_value, is_qualified_name, parse_int64
from caldera.models.record import Quantities, Record, Time, settle_times
from caldera.models.selectors import LabelSelector

__all__ = [
    "FINISHED_PHASES",
    "Affinity",
    "ConfigMap",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PriorityClass",
    "ResourceQuota",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
    "effective_requests",
    "qos_rank",
]

# kube-scheduler scores pods that do not state a cpu or memory request as if they asked for this
# much (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100.0
DEFAULT_MEMORY_REQUEST = 200.0 * 1024 * 1024


class Toleration(Record, kw_only=True, frozen=True):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = ""
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """kube's ToleratesTaint: empty effect matches all effects, empty key with Exists matches
        every taint, Equal (or empty) operator compares values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


class Taint(Record, kw_only=True, frozen=True):
    key: Annotated[str, Meta(min_length=1)]
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeSelectorRequirement(Record, kw_only=True, frozen=True):
    """One node selector requirement. The value counts the API server enforces are checked on
    load; what only kube-scheduler checks (label syntax, a ``Gt``/``Lt`` integer) is answered by
    :attr:`label_ok` and :attr:`field_ok`, and an invalid requirement makes its term match nothing.
    """

    key: Annotated[str, Meta(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        if self.operator in ("Gt", "Lt") and len(self.values) != 1:
            raise ValueError(f"operator {self.operator} needs exactly one value")

    @property
    def label_ok(self) -> bool:
        """Whether apimachinery's ``labels.NewRequirement`` accepts it as a matchExpressions
        entry: a qualified-name key, label values, one integer for ``Gt``/``Lt``."""
        if not is_qualified_name(self.key) or not all(is_label_value(v) for v in self.values):
            return False
        return self.operator not in ("Gt", "Lt") or parse_int64(self.values[0]) is not None

    @property
    def field_ok(self) -> bool:
        """Whether kube's ``nodeSelectorRequirementsAsFieldSelector`` accepts it as a matchFields
        entry: ``In`` or ``NotIn`` with exactly one value."""
        return self.operator in ("In", "NotIn") and len(self.values) == 1


class NodeSelectorTerm(Record, kw_only=True, frozen=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """An empty term matches nothing."""
        return not self.match_expressions and not self.match_fields

    @property
    def valid(self) -> bool:
        """Whether kube-scheduler can parse every requirement; an invalid term matches nothing
        (``nodeaffinity.newNodeSelectorTerm`` records parse errors and the term never matches)."""
        return all(r.label_ok for r in self.match_expressions) and all(
            r.field_ok for r in self.match_fields
        )


class NodeSelector(Record, kw_only=True, frozen=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(Record, kw_only=True, frozen=True):
    weight: Annotated[int, Meta(ge=1, le=100)]
    preference: NodeSelectorTerm


class NodeAffinity(Record, kw_only=True, frozen=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class PodAffinityTerm(Record, kw_only=True, frozen=True):
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    topology_key: Annotated[str, Meta(min_length=1)]
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


class WeightedPodAffinityTerm(Record, kw_only=True, frozen=True):
    weight: Annotated[int, Meta(ge=1, le=100)]
    pod_affinity_term: PodAffinityTerm


class PodAffinity(Record, kw_only=True, frozen=True):
    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class Affinity(Record, kw_only=True, frozen=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(Record, kw_only=True, frozen=True):
    max_skew: Annotated[int, Meta(ge=1)]
    topology_key: Annotated[str, Meta(min_length=1)]
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: Annotated[int, Meta(ge=1)] | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: tuple[str, ...] = ()


class ContainerPort(Record, kw_only=True, frozen=True):
    container_port: Annotated[int, Meta(ge=1, le=65535)]
    host_port: Annotated[int, Meta(ge=0, le=65535)] = 0
    host_ip: str = msgspec.field(default="", name="hostIP")
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class ContainerResources(Record, kw_only=True, frozen=True):
    requests: Quantities = msgspec.field(default_factory=Quantities)
    limits: Quantities = msgspec.field(default_factory=Quantities)

    def effective(self) -> dict[str, float]:
        """Requests, with the API server's defaulting: a resource that has only a limit requests
        that limit."""
        return {**self.limits, **self.requests}


class Container(Record, kw_only=True, frozen=True):
    name: str = ""
    image: str = ""
    resources: ContainerResources = msgspec.field(default_factory=ContainerResources)
    restart_policy: str | None = None
    ports: tuple[ContainerPort, ...] = ()

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"


class ClaimVolumeSource(Record, kw_only=True, frozen=True):
    claim_name: Annotated[str, Meta(min_length=1)]


class EphemeralVolumeSource(Record, kw_only=True, frozen=True):
    """A generic ephemeral volume; its claim is named ``<pod name>-<volume name>`` (the claim
    template itself does not matter for scheduling)."""


class Volume(Record, kw_only=True, frozen=True):
    """A pod volume, as far as the volume filters care: backed by a PersistentVolumeClaim (named
    or ephemeral) or not."""

    name: Annotated[str, Meta(min_length=1)]
    persistent_volume_claim: ClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None


class PodResourceClaim(Record, kw_only=True, frozen=True):
    """A pod's ``spec.resourceClaims`` entry: a ResourceClaim by name, or one the ResourceClaim
    controller creates from a template (its name is then in ``status.resourceClaimStatuses``)."""

    name: Annotated[str, Meta(min_length=1)]
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSchedulingGate(Record, kw_only=True, frozen=True):
    name: Annotated[str, Meta(min_length=1)]


class PodSchedulingGroup(Record, kw_only=True, frozen=True):
    """The ``scheduling.k8s.io`` PodGroup the pod belongs to (Kubernetes 1.36+)."""

    pod_group_name: str | None = None


class PodSpec(Record, kw_only=True, frozen=True):
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    containers: Annotated[tuple[Container, ...], Meta(min_length=1)]
    init_containers: tuple[Container, ...] = ()
    overhead: Quantities = msgspec.field(default_factory=Quantities)
    resources: ContainerResources | None = None
    """Pod-level resources (PodLevelResources, on by default since Kubernetes 1.34)."""
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    volumes: tuple[Volume, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    scheduling_gates: tuple[PodSchedulingGate, ...] = ()
    """While any is left, no scheduler may place the pod (the API server refuses its binding)."""
    scheduling_group: PodSchedulingGroup | None = None


class PodCondition(Record, kw_only=True, frozen=True):
    type: str
    status: str = "Unknown"
    reason: str = ""
    message: str = ""


class PodResourceClaimStatus(Record, kw_only=True, frozen=True):
    name: Annotated[str, Meta(min_length=1)]
    resource_claim_name: str | None = None


FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases after which a pod holds nothing on its node."""


class PodStatus(Record, kw_only=True, frozen=True):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] = "Pending"
    conditions: tuple[PodCondition, ...] = ()
    nominated_node_name: str = ""
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()
    start_time: Time = None
    """When the kubelet took the pod (cooldown protection counts from it)."""

    def __post_init__(self) -> None:
        settle_times(self, "start_time")

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class Pod(Record, kw_only=True, frozen=True):
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus = msgspec.field(default_factory=PodStatus)


def _add(into: dict[str, float], more: dict[str, float]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0.0) + value


def _max(into: dict[str, float], other: dict[str, float]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0.0):
            into[name] = value


def _requests(
    spec: PodSpec, container_requests: dict[int, dict[str, float]], overhead: dict[str, float]
) -> dict[str, float]:
    """kube's PodRequests: sum of app containers; sidecars (restartable init containers) run
    alongside them and every later init container; the pod needs the max of that and each init
    container's peak; overhead is added on top."""
    reqs: dict[str, float] = {}
    for c in spec.containers:
        _add(reqs, container_requests[id(c)])
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for c in spec.init_containers:
        own = container_requests[id(c)]
        if c.is_sidecar:
            _add(reqs, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(reqs, init_peak)
    _add(reqs, overhead)
    return reqs


def _pod_level(spec: PodSpec) -> dict[str, float]:
    """Pod-level requests that replace the containers' aggregate (cpu, memory, hugepages)."""
    if spec.resources is None:
        return {}
    return {
        name: value
        for name, value in spec.resources.effective().items()
        if name in ("cpu", "memory") or name.startswith("hugepages-")
    }


def effective_requests(spec: PodSpec) -> dict[str, float]:
    """The pod's resource request as kube-scheduler's NodeResourcesFit sees it: containers
    aggregated, pod-level requests (where set) replacing that aggregate, overhead on top."""
    per = {id(c): c.resources.effective() for c in (*spec.containers, *spec.init_containers)}
    reqs = _requests(spec, per, {})
    reqs.update(_pod_level(spec))
    _add(reqs, spec.overhead)
    return reqs


def nonzero_requests(spec: PodSpec) -> tuple[float, float]:
    """(milli-cpu, memory) for scoring: like :func:`effective_requests`, but a container that does
    not state cpu or memory counts kube-scheduler's defaults (100m, 200Mi)."""
    per: dict[int, dict[str, float]] = {}
    for c in (*spec.containers, *spec.init_containers):
        own = c.resources.effective()
        per[id(c)] = {
            "cpu": own.get("cpu", DEFAULT_MILLI_CPU_REQUEST),
            "memory": own.get("memory", DEFAULT_MEMORY_REQUEST),
        }
    reqs = _requests(spec, per, {})
    reqs.update({k: v for k, v in _pod_level(spec).items() if k in ("cpu", "memory")})
    _add(reqs, spec.overhead)
    return reqs["cpu"], reqs["memory"]


class NodeSpec(Record, kw_only=True, frozen=True):
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()


class NodeCondition(Record, kw_only=True, frozen=True):
    type: str
    status: str = "Unknown"


class ContainerImage(Record, kw_only=True, frozen=True):
    names: tuple[str, ...] = ()
    size_bytes: int = 0


class NodeStatus(Record, kw_only=True, frozen=True):
    capacity: Quantities = msgspec.field(default_factory=Quantities)
    allocatable: Quantities = msgspec.field(default_factory=Quantities)
    conditions: tuple[NodeCondition, ...] = ()
    images: tuple[ContainerImage, ...] = ()


class Node(Record, kw_only=True, frozen=True):
    metadata: ObjectMeta
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def allocatable(self) -> dict[str, float]:
        """Allocatable, falling back to capacity where the kubelet has not reported it."""
        return {**self.status.capacity, **self.status.allocatable}

    @property
    def ready(self) -> bool:
        """Ready unless a Ready condition says otherwise (a plain manifest states no conditions)."""
        for cond in self.status.conditions:
            if cond.type == "Ready":
                return cond.status == "True"
        return True


class Namespace(Record, kw_only=True, frozen=True):
    """Namespaces are read for their labels (pod affinity's ``namespaceSelector``)."""

    metadata: ObjectMeta


class ConfigMap(Record, kw_only=True, frozen=True):
    """The ConfigMaps MindCluster's vNPU scheduling reads (its device lists and NodeD's node
    status, :mod:`caldera.devices.mindcluster_info`): only their string ``data``."""

    metadata: ObjectMeta
    data: dict[str, str] | None = None
    """None when it has none (a manifest may say ``data:`` with nothing after it)."""


class ResourceQuotaSpec(Record, kw_only=True, frozen=True):
    hard: Quantities = msgspec.field(default_factory=Quantities)


class ResourceQuotaStatus(Record, kw_only=True, frozen=True):
    hard: Quantities = msgspec.field(default_factory=Quantities)
    """What the quota controller enforces (``spec.hard`` once it has seen the quota)."""
    used: Quantities = msgspec.field(default_factory=Quantities)


class ResourceQuota(Record, kw_only=True, frozen=True):
    """Namespace quotas, read for HAMi's device quota (``limits.nvidia.com/gpumem`` …) and the
    resourcequota plugin's admission gate."""

    metadata: ObjectMeta
    spec: ResourceQuotaSpec = msgspec.field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus = msgspec.field(default_factory=ResourceQuotaStatus)


class PriorityClass(Record, kw_only=True, frozen=True):
    metadata: ObjectMeta
    value: int
    global_default: bool = False
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None


def qos_rank(spec: PodSpec) -> int:
    """The pod's QoS class as Kubernetes' ``GetPodQOS`` gives it: 0 BestEffort (no cpu or memory
    request or limit), 2 Guaranteed (every container limits cpu and memory and requests what it
    limits), 1 Burstable otherwise."""
    stated = False
    guaranteed = True
    for c in (*spec.containers, *spec.init_containers):
        requests, limits = c.resources.requests, c.resources.limits
        for name in ("cpu", "memory"):
            if requests.get(name) or limits.get(name):
                stated = True
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not stated:
        return 0
    return 2 if guaranteed else 1
