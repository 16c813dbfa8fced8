"""The validated API objects the scheduler knows about, keyed the way the engine looks them up."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from caldera.models.core import ConfigMap, Namespace, Node, Pod, PriorityClass, ResourceQuota
from caldera.models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from caldera.models.kinds import KINDS, kind_of_model
from caldera.models.numa import Numatopology
from caldera.models.policy import PodDisruptionBudget
from caldera.models.shard import NodeShard
from caldera.models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue
from caldera.models.workload import WorkloadPodGroup
from caldera.models.workloads import ReplicaSet, ReplicationController, Service, StatefulSet

__all__ = ["Changes", "ClusterState", "StateObject", "copy_state", "overlay", "table_of"]

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
    | ResourceQuota
    | PodDisruptionBudget
    | HyperNode
    | NodeShard
    | Numatopology
    | Service
    | ReplicationController
    | ReplicaSet
    | StatefulSet
    | WorkloadPodGroup
    | ConfigMap
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
    hypernodes: dict[str, HyperNode] = field(default_factory=dict)
    """HyperNodes (network topology)."""
    node_shards: dict[str, NodeShard] = field(default_factory=dict)
    """NodeShards (the nodes each scheduler of a sharded cluster places pods on), by name."""
    numatopologies: dict[str, Numatopology] = field(default_factory=dict)
    """Per node (by name), its NUMA topology as Volcano's resource exporter writes it."""
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
    resource_quotas: dict[str, ResourceQuota] = field(default_factory=dict)
    """By ``namespace/name`` (device quota)."""
    disruption_budgets: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    """By ``namespace/name`` (the pdb plugin)."""
    services: dict[str, Service] = field(default_factory=dict)
    """By ``namespace/name``; with the three controller kinds below, the selectors of
    PodTopologySpread's system default constraints."""
    replication_controllers: dict[str, ReplicationController] = field(default_factory=dict)
    replica_sets: dict[str, ReplicaSet] = field(default_factory=dict)
    stateful_sets: dict[str, StatefulSet] = field(default_factory=dict)
    workload_podgroups: dict[str, WorkloadPodGroup] = field(default_factory=dict)
    """Kubernetes' own PodGroups (``scheduling.k8s.io``), by ``namespace/name``."""
    config_maps: dict[str, ConfigMap] = field(default_factory=dict)
    """By ``namespace/name``: only those labelled for MindCluster's consumers (the device
    lists and node statuses its vNPU scheduling reads)."""
    invalid: dict[str, str] = field(default_factory=dict)
    """Objects the API holds that failed validation: ``<Kind>/<key>`` → what is wrong. Left out
    of every other table; kept so the pods that refer to them can say why they wait."""
    owner_min_members: dict[str, int] = field(default_factory=dict)
    """The ``group-min-member`` of controllers that own bare pods, by controller UID (1 when the
    controller has none); a bare pod whose controller is not here yet waits for it."""

    def add(self, obj: StateObject) -> bool:
        """Store an object; True if it replaced one with the same key."""
        kind = kind_of_model(type(obj))
        meta = obj.metadata
        key = kind.key(meta.namespace, meta.name)
        store: dict[str, StateObject] = getattr(self, kind.table)
        replaced = key in store
        store[key] = obj
        return replaced


def table_of(kind: type) -> str:
    """The :class:`ClusterState` attribute that holds objects of model ``kind``."""
    return kind_of_model(kind).table


@dataclass(slots=True)
class Changes:
    """What to do to a copy of a :class:`ClusterState`: per table, the objects to store and the
    keys to drop; ``full`` clears the copy first.

    To another process the objects of the API kinds travel as JSON (as the API sent them) and
    are validated on arrival with their table's model: far cheaper to send than the models
    themselves. To a session thread they travel as the objects the cache holds (``decoded``):
    they are immutable, so both sides share them."""

    tables: dict[str, tuple[dict[str, Any], list[str]]] = field(default_factory=dict)
    full: bool = False
    bound: dict[str, str] = field(default_factory=dict)
    """Pods whose only change is their bind: pod → node (applied to the pod already held)."""
    annotated: dict[str, dict[str, str]] = field(default_factory=dict)
    """Pods whose other change is only their annotations: pod → annotations (applied to the pod
    already held, before its bind)."""
    decoded: bool = False
    """The tables hold objects, not JSON."""

    def __len__(self) -> int:
        return (
            len(self.bound)
            + len(self.annotated)
            + sum(len(stored) + len(dropped) for stored, dropped in self.tables.values())
        )

    def pod_keys(self) -> set[str] | None:
        """The pods these changes touch (None when they replace the whole state)."""
        if self.full:
            return None
        stored, dropped = self.tables.get("pods", ({}, []))
        return {*stored, *dropped, *self.bound, *self.annotated}

    def apply_to(self, state: ClusterState) -> ClusterState:
        """``state`` with these changes (a new, empty state first when ``full``)."""
        out = ClusterState() if self.full else state
        for table, (stored, dropped) in self.tables.items():
            store: dict[str, Any] = getattr(out, table)
            for key in dropped:
                store.pop(key, None)
            store.update(stored if self.decoded else _decode(table, stored))
        for key, notes in self.annotated.items():
            pod = out.pods.get(key)
            if pod is not None:
                meta = pod.metadata.model_copy(update={"annotations": notes})
                out.pods[key] = pod.model_copy(update={"metadata": meta})
        for key, node in self.bound.items():
            pod = out.pods.get(key)
            if pod is not None:
                spec = pod.spec.model_copy(update={"node_name": node})
                out.pods[key] = pod.model_copy(update={"spec": spec})
        return out


_KIND_OF_TABLE = {kind.table: kind for kind in KINDS.values()}


def _decode(table: str, stored: dict[str, Any]) -> dict[str, Any]:
    kind = _KIND_OF_TABLE.get(table)
    if kind is None:
        return stored  # not an API kind (owner_min_members, invalid): sent as it is
    validate = kind.model.model_validate_json
    return {key: validate(raw) for key, raw in stored.items()}


def copy_state(state: ClusterState) -> ClusterState:
    """A copy whose tables can change without touching ``state``'s (the objects are shared:
    they are immutable)."""
    return ClusterState(**{f.name: dict(getattr(state, f.name)) for f in fields(state)})


def overlay(state: ClusterState, top: ClusterState) -> None:
    """Store every object of ``top`` in ``state``, in place of any with the same key."""
    for f in fields(state):
        getattr(state, f.name).update(getattr(top, f.name))
