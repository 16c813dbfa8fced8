"""The cluster as one scheduling session sees it.

A snapshot is built fresh for every session (from the operator's cache or from manifests) and then
belongs to that session alone: the session mutates it freely and throws it away. That is what lets
the engine be a plain synchronous function of its input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from caldera.api.hypernode import HyperNodeTree
from caldera.api.job import Job
from caldera.api.jobtable import SettledJobs
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import Task
from caldera.api.usage import NodeUsage
from caldera.models.core import ConfigMap
from caldera.models.dra import DraObjects
from caldera.models.numa import Numatopology
from caldera.models.policy import PodDisruptionBudget
from caldera.models.storage import StorageObjects
from caldera.models.workloads import SpreadOwners
from caldera.sharding.shard import ShardView

__all__ = ["NAMESPACE_NAME_LABEL", "QuotaStatus", "Snapshot"]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class QuotaStatus:
    """One ResourceQuota as admission reads it, in engine units."""

    name: str
    hard: dict[str, float]
    used: dict[str, float]


@dataclass(slots=True, eq=False)
class Snapshot:
    space: ResourceSpace
    nodes: NodeTable
    jobs: dict[str, Job]
    queues: dict[str, Queue]
    now: float
    """Seconds since the epoch at session start (injected, so simulation is reproducible)."""
    session_id: str
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    """Labels of every namespace the API holds (pod affinity's namespaceSelector); see
    :meth:`labels_of_namespace` for namespaces not listed."""
    volumes: StorageObjects = field(default_factory=StorageObjects)
    """PersistentVolumes, claims, StorageClasses and CSINodes (the volume filters)."""
    dra: DraObjects = field(default_factory=DraObjects)
    """ResourceClaims, DeviceClasses, ResourceSlices and the pods' claim statuses
    (DynamicResources)."""
    disruption_budgets: list[PodDisruptionBudget] = field(default_factory=list)
    """The PodDisruptionBudgets (preemption and reclaim leave them intact)."""
    quotas: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per namespace, the tightest ``spec.hard`` of its ResourceQuotas (device quota)."""
    priority_classes: dict[str, int] = field(default_factory=dict)
    """PriorityClass name → value."""
    numatopologies: dict[str, Numatopology] = field(default_factory=dict)
    """Per node name, its NUMA topology (the numa-aware plugin)."""
    """PriorityClass name → value."""
    quota_statuses: dict[str, list[QuotaStatus]] = field(default_factory=dict)
    """Per namespace, its ResourceQuotas' limits and usage, by name (the resourcequota plugin)."""
    held: dict[str, tuple[Task, str]] = field(default_factory=dict)
    """Pending pods of our scheduler that no session can place until something else changes
    (their PodGroup or queue is missing or invalid), by ``namespace/name``, with why: they are
    not scheduled, but still told their reason and explained."""
    hypernodes: HyperNodeTree | None = None
    shard: ShardView | None = None
    outside_allocatable: Vector | None = None
    """The allocatable of nodes other scheduler instances place on, counted in the cluster's
    total for the queues' shares (a hash split)."""
    """This scheduler's NodeShard, in sharding mode hard or soft (:mod:`caldera.sharding.shard`)."""
    node_usage: Mapping[str, NodeUsage] = field(default_factory=dict)
    """Nodes' real load from a metrics source, by node name (the ``usage`` plugin)."""
    """The network topology, when the cluster has HyperNodes."""
    active: dict[str, Job] | None = None
    """The jobs a session has something to decide or write about, in ``jobs`` order (None:
    the session sorts them out of ``jobs`` at open); the others are settled."""
    settled: SettledJobs | None = None
    """The settled jobs' sums, with :attr:`active`."""
    spread_owners: SpreadOwners = field(default_factory=SpreadOwners)
    """Services and controllers, whose selectors make PodTopologySpread's system default
    constraints."""
    config_maps: dict[str, ConfigMap] = field(default_factory=dict)
    """MindCluster's ConfigMaps, by ``namespace/name`` (deviceshare's Ascend vNPUs)."""

    def labels_of_namespace(self, name: str) -> dict[str, str]:
        """A namespace's labels; one not listed has only the label the API server gives all."""
        labels = self.namespace_labels.get(name)
        return labels if labels is not None else {NAMESPACE_NAME_LABEL: name}

    def total_allocatable(self) -> Vector:
        """The cluster's allocatable, as the queues' shares count it."""
        return self.nodes.total(self.outside_allocatable)
