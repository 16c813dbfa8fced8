"""The validated API objects the scheduler knows about, keyed the way the engine looks them up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caldera.models.core import Namespace, Node, Pod, PriorityClass
from caldera.models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from caldera.models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.models.volcano import PodGroup, Queue

__all__ = ["ClusterState", "StateObject", "table_of"]

StateObject = (
    Pod
    | Node
    | PodGroup
    | Queue
    | PriorityClass
    | Namespace
    | PersistentVolume
    | PersistentVolumeClaim
    | StorageClass
    | CSINode
    | ResourceClaim
    | ResourceClaimTemplate
    | DeviceClass
    | ResourceSlice
)
"""Every kind :meth:`ClusterState.add` stores."""


@dataclass(slots=True)
class ClusterState:
    pods: dict[str, Pod] = field(default_factory=dict)
    """By ``namespace/name``."""
    nodes: dict[str, Node] = field(default_factory=dict)
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    """By ``namespace/name``."""
    queues: dict[str, Queue] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    """Namespaces the API holds (for their labels); a pod's namespace missing here is taken to
    exist with only the ``kubernetes.io/metadata.name`` label the API server gives every one."""
    hypernodes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """HyperNode objects as the API holds them (network topology; used once HyperNode-aware
    placement lands)."""
    persistent_volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    persistent_volume_claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    """By ``namespace/name``."""
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    resource_claims: dict[str, ResourceClaim] = field(default_factory=dict)
    """By ``namespace/name``."""
    resource_claim_templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    """By ``namespace/name``."""
    device_classes: dict[str, DeviceClass] = field(default_factory=dict)
    resource_slices: dict[str, ResourceSlice] = field(default_factory=dict)

    def add(self, obj: StateObject) -> bool:
        """Store an object; True if it replaced one with the same key."""
        table, namespaced = _TABLES[type(obj)]
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if namespaced else meta.name
        store: dict[str, StateObject] = getattr(self, table)
        replaced = key in store
        store[key] = obj
        return replaced


_TABLES: dict[type, tuple[str, bool]] = {
    Pod: ("pods", True),
    PodGroup: ("podgroups", True),
    PersistentVolumeClaim: ("persistent_volume_claims", True),
    Node: ("nodes", False),
    Queue: ("queues", False),
    PriorityClass: ("priority_classes", False),
    Namespace: ("namespaces", False),
    PersistentVolume: ("persistent_volumes", False),
    StorageClass: ("storage_classes", False),
    CSINode: ("csi_nodes", False),
    ResourceClaim: ("resource_claims", True),
    ResourceClaimTemplate: ("resource_claim_templates", True),
    DeviceClass: ("device_classes", False),
    ResourceSlice: ("resource_slices", False),
}
"""Where :meth:`ClusterState.add` keeps each kind, and whether its key is ``namespace/name``."""


def table_of(kind: type) -> str:
    """The :class:`ClusterState` attribute that holds objects of model ``kind``."""
    return _TABLES[kind][0]
