"""Kubernetes' own gang API: ``scheduling.k8s.io`` PodGroups (``v1alpha2`` in 1.36 behind the
``GenericWorkload`` feature gate, ``v1alpha3`` in 1.37), which Job, JobSet and LeaderWorkerSet
controllers create, and the pod field that joins a pod to one (``spec.schedulingGroup``).

Only what a scheduler reads: the scheduling policy (``basic``, or ``gang`` with ``minCount``) and
the status conditions it writes back. Follows ``staging/src/k8s.io/api/scheduling/v1alpha2`` and
``v1alpha3`` ``types.go`` (``PodGroupSchedulingPolicy``: exactly one of ``basic`` and ``gang``;
``minCount`` required and at least 1).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from caldera.models.base import ApiModel, ObjectMeta
from caldera.models.core import PodCondition

__all__ = [
    "CONDITION_BY_VERSION",
    "DISRUPTION_TARGET",
    "REASON_PREEMPTION",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "WORKLOAD_GROUP",
    "WorkloadPodGroup",
]

WORKLOAD_GROUP = "scheduling.k8s.io"
CONDITION_BY_VERSION = {"v1alpha2": "PodGroupScheduled", "v1alpha3": "PodGroupInitiallyScheduled"}
"""The condition kube-scheduler writes on a PodGroup it has scheduled, per API version (one
type, never turned back to False once True)."""
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION = "PreemptionByScheduler"


class GangPolicy(ApiModel):
    min_count: int = Field(ge=1)


class SchedulingPolicy(ApiModel):
    basic: dict[str, Any] | None = None
    gang: GangPolicy | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SchedulingPolicy:
        if (self.basic is None) == (self.gang is None):
            raise ValueError("exactly one of basic and gang must be set")
        return self

    @property
    def min_count(self) -> int:
        """The gang's minCount; a basic group places each pod on its own (1)."""
        return self.gang.min_count if self.gang is not None else 1


class WorkloadPodGroupSpec(ApiModel):
    scheduling_policy: SchedulingPolicy


class WorkloadPodGroupStatus(ApiModel):
    conditions: tuple[PodCondition, ...] = ()
    """``metav1.Condition`` s: the fields read are a pod condition's."""

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class WorkloadPodGroup(ApiModel):
    metadata: ObjectMeta
    spec: WorkloadPodGroupSpec
    status: WorkloadPodGroupStatus = Field(default_factory=WorkloadPodGroupStatus)
