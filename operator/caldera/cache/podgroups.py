"""PodGroups for pods that arrive without one (Volcano's pg-controller duty, done by us).

A pod handled by Caldera that has no ``scheduling.k8s.io/group-name`` annotation gets a PodGroup
``podgroup-<controller owner UID, else pod UID>`` with minMember 1 (or the owner's
``scheduling.volcano.sh/group-min-member``), the queue from the pod's
``scheduling.volcano.sh/queue-name`` annotation, the pod's priority class, the pod's requests as
minResources and the ``networkTopology`` of its ``volcano.sh/network-topology-*`` annotations;
the pod is then annotated with the group name.
"""

from __future__ import annotations

from typing import Any

from caldera.models.core import Pod, effective_requests
from caldera.models.volcano import (
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    PodGroup,
    topology_from_annotations,
)
from caldera.quantity import format_resource

__all__ = [
    "annotate_pod",
    "implicit_podgroup",
    "implicit_podgroup_manifest",
    "implicit_podgroup_name",
]


def implicit_podgroup_name(pod: Pod) -> str:
    owner = next((o for o in pod.metadata.owner_references if o.controller and o.uid), None)
    return f"podgroup-{owner.uid if owner else pod.metadata.uid}"


def implicit_podgroup_manifest(pod: Pod, *, min_member: int = 1) -> dict[str, Any]:
    """The PodGroup object to create for ``pod``, as the API takes it."""
    meta = pod.metadata
    requests = {
        name: format_resource(name, value)
        for name, value in sorted(effective_requests(pod.spec).items())
        if value
    }
    owners = [o for o in meta.owner_references if o.controller]
    if owners:
        owner_refs = [o.model_dump() for o in owners]
    else:
        owner_refs = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.name,
                "uid": meta.uid,
                "controller": True,
            }
        ]
    manifest: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": implicit_podgroup_name(pod),
            "namespace": meta.namespace,
            "ownerReferences": owner_refs,
        },
        "spec": {
            "minMember": min_member,
            "minResources": requests,
        },
        "status": {"phase": "Pending"},
    }
    queue = meta.annotations.get(QUEUE_NAME_ANNOTATION, "")
    if queue:
        manifest["spec"]["queue"] = queue
    if pod.spec.priority_class_name:
        manifest["spec"]["priorityClassName"] = pod.spec.priority_class_name
    topology = topology_from_annotations(meta.annotations)
    if topology is not None and not isinstance(topology, str):
        manifest["spec"]["networkTopology"] = topology.model_dump(by_alias=True, exclude_none=True)
    return manifest


def implicit_podgroup(pod: Pod, *, min_member: int = 1) -> PodGroup:
    manifest = implicit_podgroup_manifest(pod, min_member=min_member)
    manifest["metadata"]["creationTimestamp"] = pod.metadata.creation_timestamp
    return PodGroup.model_validate(manifest)


def annotate_pod(pod: Pod, group: str) -> Pod:
    meta = pod.metadata.model_copy(
        update={"annotations": {**pod.metadata.annotations, GROUP_NAME_ANNOTATION: group}}
    )
    return pod.model_copy(update={"metadata": meta})
