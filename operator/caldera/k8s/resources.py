"""Where the resources the operator reads and writes live in the API.

The scheduler's own kinds come from :data:`caldera.models.kinds.KINDS`; the rest are the few
resources only written (events, leases) or read once (a pod's controller, for its
``group-min-member``).
"""

from __future__ import annotations

from caldera.k8s.rest import Resource
from caldera.models.kinds import KINDS, Kind
from caldera.models.volcano import GROUP_OWNER_KINDS

__all__ = [
    "COMMANDS",
    "CREATED_LABELS",
    "EVENTS",
    "LEASES",
    "MUTATING",
    "OWNERS",
    "PODGROUPS",
    "PODS",
    "PVCS",
    "PVS",
    "QUEUES",
    "RESOURCE_CLAIMS",
    "SECRETS",
    "VALIDATING",
    "resource_of",
]


def resource_of(kind: Kind) -> Resource:
    return Resource(kind.group, kind.version, kind.plural)


PODS = resource_of(KINDS["Pod"])
PODGROUPS = resource_of(KINDS["PodGroup"])
QUEUES = resource_of(KINDS["Queue"])
HYPERNODES = resource_of(KINDS["HyperNode"])
NODESHARDS = resource_of(KINDS["NodeShard"])
PVS = resource_of(KINDS["PersistentVolume"])
PVCS = resource_of(KINDS["PersistentVolumeClaim"])
RESOURCE_CLAIMS = resource_of(KINDS["ResourceClaim"])
EVENTS = Resource("", "v1", "events")
COMMANDS = Resource("bus.volcano.sh", "v1alpha1", "commands")
"""Volcano's bus Commands: ``vcctl queue operate`` asks for a queue to open or close with one."""
LEASES = Resource("coordination.k8s.io", "v1", "leases")
OWNERS = {
    (api_version, kind): Resource(
        api_version.partition("/")[0], api_version.partition("/")[2], kind.lower() + "s"
    )
    for api_version, kind in GROUP_OWNER_KINDS
}
"""Controllers whose ``scheduling.volcano.sh/group-min-member`` annotation sizes the group of the
pods they own."""

SECRETS = Resource("", "v1", "secrets")
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
CREATED_LABELS = {"app.kubernetes.io/part-of": "caldera"}
"""The labels of the objects the operator creates for itself (the TLS Secret, the webhook
configurations)."""
