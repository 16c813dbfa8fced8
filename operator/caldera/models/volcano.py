"""Volcano's scheduling kinds: PodGroup and Queue (``scheduling.volcano.sh/v1beta1``).

Field names, defaults and validation follow Volcano's CRDs (see shared/reference/volcano.md §1), so
objects written for Volcano load unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from caldera.models.base import ApiModel, ObjectMeta, ResourceList, Timestamp, format_timestamp

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "GROUP_OWNER_KINDS",
    "QUEUE_NAME_ANNOTATION",
    "PodGroup",
    "PodGroupCondition",
    "Queue",
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

PodGroupPhase = Literal["Pending", "Running", "Unknown", "Inqueue", "Completed", ""]
QueueState = Literal["Open", "Closed", "Closing", "Unknown", ""]


class PodGroupCondition(ApiModel):
    type: str
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


class PodGroupSpec(ApiModel):
    min_member: int = Field(default=0, ge=0)
    min_task_member: dict[str, int] = Field(default_factory=dict)
    queue: str = ""
    priority_class_name: str = ""
    min_resources: ResourceList | None = None


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


class QueueSpec(ApiModel):
    # The CRD says min 1, but Volcano's mutating webhook turns 0 into 1 before validation.
    weight: int = Field(default=1, ge=0, le=65535)
    capability: ResourceList | None = None
    reclaimable: bool | None = None
    guarantee: Guarantee = Field(default_factory=Guarantee)
    deserved: ResourceList | None = None
    parent: str = ""
    priority: int = Field(default=0, ge=0)


class QueueStatus(ApiModel):
    state: QueueState = ""
    allocated: ResourceList = Field(default_factory=dict)


class Queue(ApiModel):
    metadata: ObjectMeta
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)
