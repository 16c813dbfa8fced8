"""Volcano's scheduling kinds: PodGroup and Queue (``scheduling.volcano.sh/v1beta1``).

Field names, defaults and validation follow Volcano's CRDs (see shared/reference/volcano.md §1), so
objects written for Volcano load unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from caldera.models.base import ApiModel, ObjectMeta, ResourceList, Timestamp, format_timestamp
from caldera.models.selectors import LabelSelector

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "GROUP_OWNER_KINDS",
    "QUEUE_NAME_ANNOTATION",
    "PodGroup",
    "PodGroupCondition",
    "Queue",
    "QueueAffinity",
]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
GROUP_OWNER_KINDS = frozenset(
    {
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "Job"),
    }
)
"""Controllers whose ``group-min-member`` annotation sizes the group of the bare pods they own."""
TASK_SPEC_KEY = "volcano.sh/task-spec"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TOPOLOGY_MODE_ANNOTATION = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"
"""Pod annotations that give a bare pod's group its ``networkTopology`` (pg-controller)."""
ALLOCATED_HYPERNODE_ANNOTATION = "volcano.sh/job-allocated-hypernode"
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
"""A queue's place in the hierarchical drf's tree (``root/eng/prod``)."""
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
"""The weight of each level of :data:`HIERARCHY_ANNOTATION` (``1/2/8``)."""
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
"""A job's disruption budget (tdm), a count or a percentage; one of the two."""
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
"""The pod annotation that opts into queue-admission gating, and the scheduling gate's name."""

PodGroupPhase = Literal["Pending", "Running", "Unknown", "Inqueue", "Completed", ""]
QueueState = Literal["Open", "Closed", "Closing", "Unknown", ""]


class PodGroupCondition(ApiModel):
    type: str = ""  # every field is optional in the CRD
    status: str = "True"
    transition_id: str = Field(default="", alias="transitionID")
    last_transition_time: Timestamp = None
    reason: str = ""
    message: str = ""

    def to_api(self) -> dict[str, Any]:
        """The condition as the API stores it."""
        return {
            "type": self.type,
            "status": self.status,
            "transitionID": self.transition_id,
            "lastTransitionTime": format_timestamp(self.last_transition_time),
            "reason": self.reason,
            "message": self.message,
        }


class NetworkTopologySpec(ApiModel):
    """Where a job (or a sub-group) may be placed in the HyperNode tree."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = Field(default=None, ge=0)
    highest_tier_name: str = Field(default="", max_length=253)

    @model_validator(mode="after")
    def _one_tier_bound(self) -> NetworkTopologySpec:
        if self.highest_tier_allowed is not None and self.highest_tier_name:
            raise ValueError("highestTierAllowed and highestTierName are mutually exclusive")
        return self


class SubGroupPolicy(ApiModel):
    """Pods of one role (``labelSelector``), split into sub-groups by the values of
    ``matchLabelKeys``; each sub-group is placed under its own ``networkTopology``."""

    name: str = Field(default="", max_length=253)  # optional in the CRD
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int = Field(default=1, ge=1)
    min_sub_groups: int = Field(default=0, ge=0)
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()


def topology_from_annotations(notes: Mapping[str, str]) -> NetworkTopologySpec | str | None:
    """A bare pod's ``networkTopology`` from its annotations, as pg-controller reads them: None
    when it has none, a message naming the annotations when they do not make one."""
    mode = notes.get(TOPOLOGY_MODE_ANNOTATION)
    tier = notes.get(TOPOLOGY_TIER_ANNOTATION)
    if mode is None and tier is None:
        return None
    try:
        return NetworkTopologySpec.model_validate(
            {"mode": mode or "hard", "highestTierAllowed": tier}
        )
    except ValidationError:
        return (
            f"metadata.annotations[{TOPOLOGY_MODE_ANNOTATION}/{TOPOLOGY_TIER_ANNOTATION}]: "
            f"mode must be hard or soft and the tier a number ≥ 0 (got {mode!r}, {tier!r}); "
            "network topology ignored"
        )


class PodGroupSpec(ApiModel):
    min_member: int = Field(default=0, ge=0)
    min_task_member: dict[str, int] = Field(default_factory=dict)
    queue: str = ""
    priority_class_name: str = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: tuple[SubGroupPolicy, ...] = ()


class PodGroupStatus(ApiModel):
    phase: PodGroupPhase = ""
    conditions: tuple[PodGroupCondition, ...] = ()
    running: int = Field(default=0, ge=0)
    succeeded: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)


class PodGroup(ApiModel):
    metadata: ObjectMeta
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


class Guarantee(ApiModel):
    resource: ResourceList = Field(default_factory=dict)


class NodeGroupTerms(ApiModel):
    """Node groups (values of the node label ``volcano.sh/nodegroup-name``), hard and soft."""

    required_during_scheduling_ignored_during_execution: tuple[str, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[str, ...] = ()


class QueueAffinity(ApiModel):
    """Where a queue's pods may run, read by the nodegroup plugin."""

    node_group_affinity: NodeGroupTerms | None = None
    node_group_anti_affinity: NodeGroupTerms | None = None


class QueueSpec(ApiModel):
    # The CRD says min 1, but Volcano's mutating webhook turns 0 into 1 before validation.
    weight: int = Field(default=1, ge=0, le=65535)
    capability: ResourceList | None = None
    reclaimable: bool | None = None
    guarantee: Guarantee = Field(default_factory=Guarantee)
    deserved: ResourceList | None = None
    parent: str = ""
    priority: int = Field(default=0, ge=0)
    affinity: QueueAffinity | None = None


class QueueStatus(ApiModel):
    state: QueueState = ""
    allocated: ResourceList = Field(default_factory=dict)


class Queue(ApiModel):
    metadata: ObjectMeta
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)
