"""PodGroups for pods that arrive without one (Volcano's pg-controller duty, done by us).

A pod handled by Caldera that has no ``scheduling.k8s.io/group-name`` annotation gets a PodGroup
``podgroup-<controller owner UID, else pod UID>`` with minMember 1 (or the owner's
``scheduling.volcano.sh/group-min-member``), the queue from the pod's
``scheduling.volcano.sh/queue-name`` annotation, the pod's priority class, and the pod's requests as
minResources; the pod is then annotated with the group name.
"""

from __future__ import annotations

from caldera.models.core import Pod, effective_requests
from caldera.models.volcano import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, PodGroup
from caldera.quantity import format_resource

__all__ = ["annotate_pod", "implicit_podgroup", "implicit_podgroup_name"]


def implicit_podgroup_name(pod: Pod) -> str:
    owner = next((o for o in pod.metadata.owner_references if o.controller and o.uid), None)
    return f"podgroup-{owner.uid if owner else pod.metadata.uid}"


def implicit_podgroup(pod: Pod, *, min_member: int = 1) -> PodGroup:
    meta = pod.metadata
    requests = {
        name: format_resource(name, value)
        for name, value in sorted(effective_requests(pod.spec).items())
        if value
    }
    owners = [o for o in meta.owner_references if o.controller]
    if not owners:
        owners_raw = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.name,
                "uid": meta.uid,
                "controller": True,
            }
        ]
    else:
        owners_raw = [o.model_dump(by_alias=True) for o in owners]
    return PodGroup.model_validate(
        {
            "metadata": {
                "name": implicit_podgroup_name(pod),
                "namespace": meta.namespace,
                "creationTimestamp": meta.creation_timestamp,
                "ownerReferences": owners_raw,
            },
            "spec": {
                "minMember": min_member,
                "queue": meta.annotations.get(QUEUE_NAME_ANNOTATION, ""),
                "priorityClassName": pod.spec.priority_class_name,
                "minResources": requests,
            },
            "status": {"phase": "Pending"},
        }
    )


def annotate_pod(pod: Pod, group: str) -> Pod:
    meta = pod.metadata.model_copy(
        update={"annotations": {**pod.metadata.annotations, GROUP_NAME_ANNOTATION: group}}
    )
    return pod.model_copy(update={"metadata": meta})
