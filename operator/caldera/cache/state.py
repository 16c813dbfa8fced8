"""The validated API objects the scheduler knows about, keyed the way the engine looks them up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caldera.models.core import Namespace, Node, Pod, PriorityClass
from caldera.models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.models.volcano import PodGroup, Queue

__all__ = ["ClusterState", "StateObject"]

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

    def add(self, obj: StateObject) -> bool:
        """Store an object; True if it replaced one with the same key."""
        meta = obj.metadata
        if isinstance(obj, Pod):
            key = f"{meta.namespace}/{meta.name}"
            replaced = key in self.pods
            self.pods[key] = obj
        elif isinstance(obj, PodGroup):
            key = f"{meta.namespace}/{meta.name}"
            replaced = key in self.podgroups
            self.podgroups[key] = obj
        elif isinstance(obj, Node):
            replaced = meta.name in self.nodes
            self.nodes[meta.name] = obj
        elif isinstance(obj, Queue):
            replaced = meta.name in self.queues
            self.queues[meta.name] = obj
        elif isinstance(obj, Namespace):
            replaced = meta.name in self.namespaces
            self.namespaces[meta.name] = obj
        elif isinstance(obj, PersistentVolumeClaim):
            key = f"{meta.namespace}/{meta.name}"
            replaced = key in self.persistent_volume_claims
            self.persistent_volume_claims[key] = obj
        elif isinstance(obj, PersistentVolume):
            replaced = meta.name in self.persistent_volumes
            self.persistent_volumes[meta.name] = obj
        elif isinstance(obj, StorageClass):
            replaced = meta.name in self.storage_classes
            self.storage_classes[meta.name] = obj
        elif isinstance(obj, CSINode):
            replaced = meta.name in self.csi_nodes
            self.csi_nodes[meta.name] = obj
        else:
            replaced = meta.name in self.priority_classes
            self.priority_classes[meta.name] = obj
        return replaced
