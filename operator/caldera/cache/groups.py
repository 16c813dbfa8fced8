"""The two kinds of PodGroup a job can come from, and how jobs of each are keyed and named.

Volcano's PodGroup (``podgroups.scheduling.volcano.sh``) gives its job the key ``ns/name``;
Kubernetes' own (``podgroups.scheduling.k8s.io``) gives ``ns/podgroups.scheduling.k8s.io/name``,
so a namesake of the other kind never shares a job. Messages name both in full: kubectl takes a
bare ``podgroup`` for Kubernetes' own.
"""

from __future__ import annotations

from caldera.models.core import Pod
from caldera.models.kinds import KINDS
from caldera.models.volcano import GROUP_NAME_ANNOTATION

__all__ = [
    "VOLCANO_PODGROUPS",
    "WORKLOAD_PODGROUPS",
    "group_label",
    "group_ref",
    "workload_group_of",
    "workload_key",
]

VOLCANO_PODGROUPS = KINDS["PodGroup"].qualified
WORKLOAD_PODGROUPS = KINDS["WorkloadPodGroup"].qualified


def group_label(job_key: str) -> str:
    """How a job's PodGroup is named to people, with its kind's full name (kubectl resolves a
    bare ``podgroup`` to Kubernetes' own): ``podgroups.scheduling.volcano.sh ns/name`` or
    ``podgroups.scheduling.k8s.io ns/name``."""
    namespace, _, rest = job_key.partition("/")
    own = rest.removeprefix(f"{WORKLOAD_PODGROUPS}/")
    if own != rest:
        return f"{WORKLOAD_PODGROUPS} {namespace}/{own}"
    return f"{VOLCANO_PODGROUPS} {job_key}"


def workload_key(key: str) -> str:
    """The job key of Kubernetes PodGroup ``namespace/name``: apart from Volcano's PodGroup of
    the same name."""
    namespace, _, name = key.partition("/")
    return f"{namespace}/{WORKLOAD_PODGROUPS}/{name}"


def workload_group_of(pod: Pod) -> str:
    """The ``namespace/name`` of the Kubernetes PodGroup ``pod`` joins
    (``spec.schedulingGroup.podGroupName``), or ""."""
    joined = pod.spec.scheduling_group
    if joined is None or not joined.pod_group_name:
        return ""
    return f"{pod.metadata.namespace}/{joined.pod_group_name}"


def group_ref(pod: Pod) -> str:
    """The job key of the group ``pod`` names, a PodGroup by annotation or a Kubernetes PodGroup
    (``spec.schedulingGroup``), whoever schedules it; "" for a bare pod."""
    name = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
    if name:
        return f"{pod.metadata.namespace}/{name}"
    workload = workload_group_of(pod)
    return workload_key(workload) if workload else ""
