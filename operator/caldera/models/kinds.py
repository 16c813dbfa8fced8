"""The one table of the Kubernetes kinds the scheduler reads: where each lives in the API, which
model parses it, whether it is namespaced, and which :class:`~caldera.cache.state.ClusterState`
table holds it.

Everything that lists kinds (the parser, the cluster state, the operator's watches, the manifest
loader) reads this table, so a kind added here is parsed, stored and watched alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from pydantic import BaseModel

from caldera.devices.mindcluster_info import CLUSTER_CONSUMER, DEVICE_CONSUMER
from caldera.models.core import ConfigMap, Namespace, Node, Pod, PriorityClass, ResourceQuota
from caldera.models.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from caldera.models.numa import Numatopology
from caldera.models.policy import PodDisruptionBudget
from caldera.models.record import Record
from caldera.models.shard import NodeShard
from caldera.models.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue
from caldera.models.workload import WORKLOAD_GROUP, WorkloadPodGroup
from caldera.models.workloads import ReplicaSet, ReplicationController, Service, StatefulSet

__all__ = [
    "FIELD",
    "KINDS",
    "Kind",
    "Model",
    "kind_for",
    "kind_label",
    "kind_of_model",
    "selector_query",
    "with_named",
]

Model = BaseModel | Record
"""A parsed object: a pydantic model (Volcano's kinds, whose messages matter) or a slim record
(the core kinds, read by the tens of thousands)."""


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    group: str
    version: str
    plural: str
    model: type[Model]
    namespaced: bool
    table: str
    """The ClusterState attribute holding this kind, keyed ``namespace/name`` when namespaced."""
    selector_only: bool = False
    """Read only for its ``spec.selector``, for scoring (PodTopologySpread's default
    constraints): the operator's cache drops an event that leaves the selector alone, and no
    change is news, since a score never lets a pending pod fit."""
    api_kind: str = ""
    """The object's ``kind`` in the API when it is not :attr:`name` (Kubernetes' PodGroup, whose
    name Volcano's PodGroup has here)."""
    versions: tuple[str, ...] = ()
    """Versions the server may serve instead of :attr:`version`, newest first: the first one
    served is read (an alpha API moves from version to version)."""
    listed_in_pages: bool = False
    """The operator lists it at the latest version in pages (the rest at any version, in one
    piece): the kind counted in tens of thousands, whose pages are taken in while the next
    ones come."""
    label_selectors: tuple[str, ...] = ()
    """Only the objects one of these label selectors (``key=value``) picks are read: the
    operator lists and watches each selector apart, and a manifest's other objects of the kind
    are ignored (the ConfigMaps MindCluster's consumers are labelled with; a cluster's other
    ConfigMaps are never listed). Empty: every object."""
    named: tuple[str, ...] = ()
    """``namespace/name`` of objects read by name besides those the label selectors pick (the
    device ConfigMap a policy names: :func:`with_named`); each has an informer of its own, by
    field selector."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def kind(self) -> str:
        """The ``kind`` field of its objects."""
        return self.api_kind or self.name

    @property
    def all_versions(self) -> tuple[str, ...]:
        return self.versions or (self.version,)

    def at(self, version: str) -> Kind:
        """This kind as served at ``version``."""
        return replace(self, version=version)

    @property
    def qualified(self) -> str:
        """``plural.group``, the name kubectl resolves to this kind alone (Volcano's
        ``podgroups.scheduling.volcano.sh``, not Kubernetes' own
        ``podgroups.scheduling.k8s.io``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def key(self, namespace: str | None, name: str) -> str:
        return f"{namespace or 'default'}/{name}" if self.namespaced else name

    @property
    def whole(self) -> bool:
        """Every object of the kind is read (neither label selectors nor names narrow it)."""
        return not self.label_selectors and not self.named

    @property
    def selectors(self) -> tuple[str, ...]:
        """One per informer of this kind: ``""`` for a kind read whole, else each label
        selector, then a ``field:`` selector per object read by name (:func:`selector_query`)."""
        if self.whole:
            return ("",)
        by_name = tuple(
            f"{FIELD}metadata.namespace={ns},metadata.name={name}"
            for ns, _, name in (key.partition("/") for key in self.named)
        )
        return self.label_selectors + by_name

    def selects(self, labels: Mapping[str, str], key: str = "") -> bool:
        """Whether the object at ``key`` with ``labels`` is one this kind reads (see
        :attr:`label_selectors` and :attr:`named`)."""
        if self.whole or key in self.named:
            return True
        return any(
            labels.get(k) == value
            for k, _, value in (s.partition("=") for s in self.label_selectors)
        )


FIELD = "field:"
"""Marks an informer's selector as a field selector (the rest are label selectors)."""


def selector_query(selector: str) -> dict[str, str]:
    """The list and watch query parameters of an informer's selector (:attr:`Kind.selectors`):
    ``labelSelector`` or ``fieldSelector``; none for ``""``."""
    if not selector:
        return {}
    if selector.startswith(FIELD):
        return {"fieldSelector": selector.removeprefix(FIELD)}
    return {"labelSelector": selector}


def with_named(kinds: Mapping[str, Kind], named: Iterable[tuple[str, str]]) -> dict[str, Kind]:
    """``kinds`` with the objects ``named`` (kind name, ``namespace/name``) read by name too
    (:attr:`Kind.named`); a kind read whole already has them, and a kind not in ``kinds`` is
    passed over."""
    wanted: dict[str, list[str]] = {}
    for kind_name, key in sorted(set(named)):
        wanted.setdefault(kind_name, []).append(key)
    out = dict(kinds)
    for name, keys in wanted.items():
        found = out.get(name)
        if found is not None and found.label_selectors:
            out[name] = replace(found, named=tuple(keys))
    return out


def _kinds(*kinds: Kind) -> dict[str, Kind]:
    return {k.name: k for k in kinds}


KINDS: dict[str, Kind] = _kinds(
    Kind("Pod", "", "v1", "pods", Pod, True, "pods", listed_in_pages=True),
    Kind("Node", "", "v1", "nodes", Node, False, "nodes"),
    Kind("PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", PodGroup, True, "podgroups"),
    Kind("Queue", "scheduling.volcano.sh", "v1beta1", "queues", Queue, False, "queues"),
    Kind(
        "PriorityClass",
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        PriorityClass,
        False,
        "priority_classes",
    ),
    Kind("Namespace", "", "v1", "namespaces", Namespace, False, "namespaces"),
    Kind(
        "ConfigMap",
        "",
        "v1",
        "configmaps",
        ConfigMap,
        True,
        "config_maps",
        label_selectors=(f"{CLUSTER_CONSUMER}=true", f"{DEVICE_CONSUMER}=true"),
    ),
    Kind(
        "PersistentVolume",
        "",
        "v1",
        "persistentvolumes",
        PersistentVolume,
        False,
        "persistent_volumes",
    ),
    Kind(
        "PersistentVolumeClaim",
        "",
        "v1",
        "persistentvolumeclaims",
        PersistentVolumeClaim,
        True,
        "persistent_volume_claims",
    ),
    Kind(
        "StorageClass",
        "storage.k8s.io",
        "v1",
        "storageclasses",
        StorageClass,
        False,
        "storage_classes",
    ),
    Kind("CSINode", "storage.k8s.io", "v1", "csinodes", CSINode, False, "csi_nodes"),
    Kind(
        "ResourceClaim",
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        ResourceClaim,
        True,
        "resource_claims",
    ),
    Kind(
        "ResourceClaimTemplate",
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        ResourceClaimTemplate,
        True,
        "resource_claim_templates",
    ),
    Kind(
        "DeviceClass",
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        DeviceClass,
        False,
        "device_classes",
    ),
    Kind(
        "ResourceSlice",
        "resource.k8s.io",
        "v1",
        "resourceslices",
        ResourceSlice,
        False,
        "resource_slices",
    ),
    Kind("ResourceQuota", "", "v1", "resourcequotas", ResourceQuota, True, "resource_quotas"),
    Kind(
        "PodDisruptionBudget",
        "policy",
        "v1",
        "poddisruptionbudgets",
        PodDisruptionBudget,
        True,
        "disruption_budgets",
    ),
    Kind("Service", "", "v1", "services", Service, True, "services", selector_only=True),
    Kind(
        "ReplicationController",
        "",
        "v1",
        "replicationcontrollers",
        ReplicationController,
        True,
        "replication_controllers",
        selector_only=True,
    ),
    Kind(
        "ReplicaSet",
        "apps",
        "v1",
        "replicasets",
        ReplicaSet,
        True,
        "replica_sets",
        selector_only=True,
    ),
    Kind(
        "StatefulSet",
        "apps",
        "v1",
        "statefulsets",
        StatefulSet,
        True,
        "stateful_sets",
        selector_only=True,
    ),
    Kind(
        "HyperNode", "topology.volcano.sh", "v1alpha1", "hypernodes", HyperNode, False, "hypernodes"
    ),
    Kind(
        "NodeShard", "shard.volcano.sh", "v1alpha1", "nodeshards", NodeShard, False, "node_shards"
    ),
    Kind(
        "Numatopology",
        "nodeinfo.volcano.sh",
        "v1alpha1",
        "numatopologies",
        Numatopology,
        False,
        "numatopologies",
    ),
    Kind(
        "WorkloadPodGroup",
        WORKLOAD_GROUP,
        "v1alpha3",
        "podgroups",
        WorkloadPodGroup,
        True,
        "workload_podgroups",
        api_kind="PodGroup",
        versions=("v1alpha3", "v1alpha2"),
    ),
)
"""Every kind the scheduler reads, by kind name."""

_BY_MODEL = {k.model: k for k in KINDS.values()}


def kind_of_model(model: type) -> Kind:
    return _BY_MODEL[model]


_BY_API = {(k.group, k.kind): k for k in KINDS.values()}


def kind_for(api_version: object, kind: object) -> Kind | None:
    """The kind of an object with this ``apiVersion`` and ``kind`` (a manifest's); a group this
    table does not know for that kind name gives the kind of that name, if any (an object
    written without its group)."""
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    if not isinstance(kind, str):
        return None
    found = _BY_API.get((group, kind))
    if found is not None:
        return found
    by_name = KINDS.get(kind)
    return by_name if by_name is not None and not by_name.api_kind else None


SHARED_KIND_NAMES = frozenset({"PodGroup"})
"""Kinds whose name Kubernetes also serves in a group of its own (``scheduling.k8s.io``'s
PodGroup, with the ``GenericWorkload`` feature): messages name ours with its group too."""


def kind_label(kind: str) -> str:
    """How messages name ``kind``: ``PodGroup (podgroups.scheduling.volcano.sh)`` for a kind
    kubectl could take for Kubernetes' own, the bare name otherwise."""
    known = KINDS.get(kind)
    if known is None or not (known.api_kind or kind in SHARED_KIND_NAMES):
        return kind
    return f"{known.kind} ({known.qualified})"
