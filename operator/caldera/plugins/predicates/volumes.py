"""VolumeZone and NodeVolumeLimits (CSI), and the storage lookups every volume filter shares.

:class:`StorageView` answers, for one session, the questions kube-scheduler's volume plugins ask
their listers: which claims a pod uses (a ``persistentVolumeClaim`` volume names its claim; a
generic ephemeral volume's claim is ``<pod name>-<volume name>`` and must be controlled by the
pod), and which nodes a PersistentVolume's node affinity or a StorageClass's allowed topologies
admit. Node masks come from a per-label index (label value → node rows), so ``In``/``NotIn``/
``Exists`` cost O(matching rows), and every distinct selector is evaluated once per session.

**VolumeZone** (Filter only, as Volcano runs it): the zone and region labels
(``topology.kubernetes.io/{zone,region}`` and their ``failure-domain.beta`` forms, a multi-zone
value being ``a__b``) of the PersistentVolumes bound to the pod's ``persistentVolumeClaim``
volumes must match the node's; a beta label on the volume may match the node's GA label; a node
without any of those labels fits. A claim that cannot be resolved (missing claim, class or
volume, an unbound claim of an ``Immediate`` class) rejects every node with kube's message.

**NodeVolumeLimits** (Filter only): per CSI driver, the distinct volumes already attached on a
node (from every pod placed there, whatever its scheduler) plus the pod's new ones must not
exceed the driver's ``allocatable.count`` in the node's CSINode. A volume is identified as
``driver/volumeHandle`` from its bound CSI PersistentVolume, or, for a claim not bound yet, as
the claim itself under its StorageClass's provisioner. Per driver the distinct count per node is a
numpy array and each volume keeps the rows it is attached on; allocate and deallocate update
both. In-tree volumes migrated to CSI and the node's legacy ``attachable-volumes-*`` allocatable
are not counted.

Complexity per task: VolumeZone O(Z) cached mask lookups and O(N) to combine them for Z zone
labels; NodeVolumeLimits O(D·N + V·R) for D drivers and V volumes of the pod attached on R rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler, Rejection, SessionView
from caldera.models.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from caldera.models.storage import (
    PersistentVolumeClaim,
    StorageObjects,
    TopologySelectorTerm,
    claim_class,
)
from caldera.plugins.node_match import requirement_mask
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult

__all__ = [
    "MAX_VOLUME_COUNT",
    "ZONE_CONFLICT",
    "ClaimRef",
    "StorageView",
    "node_volume_limits_filter",
    "not_owned_message",
    "volume_zone_filter",
]

ZONE_CONFLICT = "node(s) had no available volume zone"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
ZONE_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA_LABEL = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
_MULTI_ZONE_DELIMITER = "__"

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A pod volume backed by a claim: the claim's name and whether it is a generic ephemeral
    volume's."""

    name: str
    ephemeral: bool


def claim_refs(task: Task) -> list[ClaimRef]:
    """The pod's claim-backed volumes, in spec order."""
    out: list[ClaimRef] = []
    for vol in task.spec.volumes:
        if vol.persistent_volume_claim is not None:
            out.append(ClaimRef(vol.persistent_volume_claim.claim_name, False))
        elif vol.ephemeral is not None:
            out.append(ClaimRef(f"{task.name}-{vol.name}", True))
    return out


def not_owned_message(claim: PersistentVolumeClaim, task: Task) -> str | None:
    """kube's VolumeIsForPod: an ephemeral volume's claim must be controlled by the pod."""
    meta = claim.metadata
    owned = meta.namespace == task.namespace and any(
        ref.controller and ref.uid == task.uid for ref in meta.owner_references
    )
    if owned:
        return None
    return (
        f"PVC {meta.namespace}/{meta.name} was not created for pod "
        f"{task.namespace}/{task.name} (pod is not owner)"
    )


def _rows_by_value(labels: Sequence[Mapping[str, str]], key: str) -> dict[str, IntArray]:
    """Per value of label ``key``, the rows of the nodes that have it (read-only arrays)."""
    rows: dict[str, list[int]] = {}
    for i, node_labels in enumerate(labels):
        value = node_labels.get(key)
        if value is not None:
            rows.setdefault(value, []).append(i)
    out = {v: np.array(r, dtype=np.intp) for v, r in rows.items()}
    for array in out.values():
        array.flags.writeable = False
    return out


class StorageView:
    """One session's storage objects and node masks (see the module docstring)."""

    def __init__(self, ssn: SessionView) -> None:
        self.objects: StorageObjects = ssn.snapshot.volumes
        self.nodes = ssn.nodes
        self.n = len(ssn.nodes)
        self.names = np.array(ssn.nodes.names, dtype=object)
        self._index: dict[str, dict[str, IntArray]] = {}
        self._masks: dict[object, BoolArray] = {}

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.objects.claims.get(f"{namespace}/{name}")

    # -- node masks --------------------------------------------------------------------------

    def _rows_by_value(self, key: str) -> dict[str, IntArray]:
        index = self._index.get(key)
        if index is None:
            labels = self.nodes.labels
            index = self._index[key] = self.nodes.derived(
                ("rows by label value", key), lambda: _rows_by_value(labels, key)
            )
        return index

    def label_in(self, key: str, values: Iterable[str]) -> BoolArray:
        """Nodes whose label ``key`` has one of ``values``."""
        mask = np.zeros(self.n, dtype=bool)
        index = self._rows_by_value(key)
        for value in values:
            rows = index.get(value)
            if rows is not None:
                mask[rows] = True
        return mask

    def has_label(self, key: str) -> BoolArray:
        return self.label_in(key, self._rows_by_value(key))

    def _requirement(self, req: NodeSelectorRequirement) -> BoolArray:
        op = req.operator
        if op in ("In", "NotIn"):
            mask = self.label_in(req.key, req.values)
            return mask if op == "In" else ~mask
        if op in ("Exists", "DoesNotExist"):
            mask = self.has_label(req.key)
            return mask if op == "Exists" else ~mask
        return requirement_mask(self.nodes.label_column(req.key), req)

    def _term(self, term: NodeSelectorTerm) -> BoolArray:
        if term.empty or not term.valid:
            return np.zeros(self.n, dtype=bool)
        mask = np.ones(self.n, dtype=bool)
        for req in term.match_expressions:
            mask &= self._requirement(req)
        # CheckNodeAffinity matches a node built from the labels alone: it has no fields, so
        # kube skips matchFields (once they parse) and the expressions decide.
        return mask

    def volume_affinity(self, selector: NodeSelector | None, *, keep: bool = True) -> BoolArray:
        """Nodes a PersistentVolume's ``nodeAffinity.required`` admits (all when unset); with
        ``keep`` the mask is cached for the session."""
        if selector is None:
            return np.ones(self.n, dtype=bool)
        mask = self._masks.get(selector)
        if mask is None:
            mask = np.zeros(self.n, dtype=bool)
            for term in selector.node_selector_terms:
                mask |= self._term(term)
            if keep:
                self._masks[selector] = mask
        return mask

    def allowed_topologies(self, terms: tuple[TopologySelectorTerm, ...]) -> BoolArray:
        """Nodes a StorageClass may provision for (MatchTopologySelectorTerms: no terms match
        every node, an empty or unparsable term matches none, terms are ORed)."""
        if not terms:
            return np.ones(self.n, dtype=bool)
        mask = self._masks.get(terms)
        if mask is None:
            mask = np.zeros(self.n, dtype=bool)
            for term in terms:
                if not term.match_label_expressions or not term.valid:
                    continue
                hit = np.ones(self.n, dtype=bool)
                for req in term.match_label_expressions:
                    hit &= self.label_in(req.key, req.values)
                mask |= hit
            self._masks[terms] = mask
        return mask

    def zone_mismatch(self, key: str, values: frozenset[str]) -> BoolArray:
        """Nodes whose ``key`` label (or, for a beta key the node lacks, its GA label) is not one
        of ``values``."""
        cache_key = ("zone", key, values)
        mask = self._masks.get(cache_key)
        if mask is None:
            fits = self.label_in(key, values)
            ga = _GA_LABEL.get(key)
            if ga is not None:
                fits |= ~self.has_label(key) & self.label_in(ga, values)
            mask = self._masks[cache_key] = ~fits
        return mask


# -- VolumeZone ---------------------------------------------------------------------------------


def _zones(value: str) -> frozenset[str] | None:
    """kube's LabelZonesToSet; None when the value holds an empty zone (the label is ignored)."""
    zones = [z.strip() for z in value.split(_MULTI_ZONE_DELIMITER)]
    return None if any(not z for z in zones) else frozenset(zones)


def _zone_topologies(view: StorageView, task: Task) -> list[tuple[str, frozenset[str]]] | str:
    """(label key, zones) of every bound volume of the pod's PVC volumes, or kube's error."""
    objects = view.objects
    out: list[tuple[str, frozenset[str]]] = []
    for ref in claim_refs(task):
        if ref.ephemeral:
            continue
        claim = view.claim(task.namespace, ref.name)
        if claim is None:
            return f'persistentvolumeclaim "{ref.name}" not found'
        pv_name = claim.spec.volume_name
        if not pv_name:
            class_name = claim_class(claim)
            if not class_name:
                return "PersistentVolumeClaim had no pv name and storageClass name"
            storage_class = objects.classes.get(class_name)
            if storage_class is None:
                return f'storageclass.storage.k8s.io "{class_name}" not found'
            if storage_class.volume_binding_mode == "WaitForFirstConsumer":
                continue
            return "PersistentVolume had no name"
        pv = objects.volumes.get(pv_name)
        if pv is None:
            return f'persistentvolume "{pv_name}" not found'
        for key in ZONE_LABELS:
            value = pv.metadata.labels.get(key)
            zones = None if value is None else _zones(value)
            if zones is not None:
                out.append((key, zones))
    return out


def volume_zone_filter(ssn: SessionView) -> NodeFilter:
    """VolumeZone: bound volumes' zone and region labels must match the node's."""
    view = StorageView(ssn)
    constrained = np.zeros(view.n, dtype=bool)
    for key in ZONE_LABELS:
        constrained |= view.has_label(key)
    everywhere = np.ones(view.n, dtype=bool)

    def pre_filter(task: Task) -> PreFilterResult:
        has_claims = any(v.persistent_volume_claim is not None for v in task.spec.volumes)
        return None if has_claims else SKIP

    def reject(task: Task) -> list[Rejection]:
        topologies = _zone_topologies(view, task)
        if isinstance(topologies, str):
            return [(topologies, everywhere)]
        bad = np.zeros(view.n, dtype=bool)
        for key, zones in topologies:
            bad |= view.zone_mismatch(key, zones)
        bad &= constrained
        return [(ZONE_CONFLICT, bad)] if bad.any() else []

    return NodeFilter("VolumeZone", reject, pre_filter=pre_filter)


# -- NodeVolumeLimits ---------------------------------------------------------------------------

VolumeId = tuple[str, str]
"""(CSI driver, volume handle): kube's unique volume name ``driver/handle``."""


class _Attachments:
    """Per CSI driver and node the distinct attached volumes, and per volume its node rows."""

    def __init__(self, view: StorageView) -> None:
        self.view = view
        n = view.n
        self.limits: dict[str, npt.NDArray[np.float64]] = {}
        index = view.nodes.index
        for node, csi_node in view.objects.csi_nodes.items():
            row = index.get(node)
            if row is None:
                continue  # not a Ready node of the table
            for driver in csi_node.spec.drivers:
                if driver.allocatable is not None and driver.allocatable.count is not None:
                    limit = self.limits.setdefault(driver.name, np.full(n, np.inf))
                    limit[row] = driver.allocatable.count
        self.distinct: dict[str, npt.NDArray[np.int64]] = {}
        self.rows_of: dict[VolumeId, dict[int, int]] = {}
        """Volume → {row: pods on that row using it} (rows with none are dropped)."""
        self._placed: dict[str, int] = {}
        self._existing: dict[str, list[VolumeId]] = {}
        if not self.limits:
            return  # no driver has a limit: nothing is ever over one, nothing needs counting
        for row, tasks in enumerate(view.nodes.tasks):
            for task in tasks.values():
                self.count(task, row, 1)

    def _volume_of(self, claim: PersistentVolumeClaim) -> VolumeId | None:
        """kube's getCSIDriverInfo: the bound CSI volume, or the claim under its class's
        provisioner while it is unbound (or its volume is gone)."""
        objects = self.view.objects
        if claim.spec.volume_name:
            pv = objects.volumes.get(claim.spec.volume_name)
            if pv is not None:
                csi = pv.spec.csi
                return None if csi is None else (csi.driver, csi.volume_handle)
        class_name = claim_class(claim)
        storage_class = objects.classes.get(class_name) if class_name else None
        if storage_class is None or not storage_class.provisioner:
            return None
        # A handle no real volume has: the same unbound claim counts once per node.
        return (storage_class.provisioner, f"\0{claim.key}")

    def new_volumes(self, task: Task) -> list[VolumeId] | str:
        """The pod's distinct volumes as a new pod sees them: a missing claim is an error."""
        out: dict[VolumeId, None] = {}
        for ref in claim_refs(task):
            claim = self.view.claim(task.namespace, ref.name)
            if claim is None:
                return (
                    f"looking up PVC {task.namespace}/{ref.name}: "
                    f'persistentvolumeclaim "{ref.name}" not found'
                )
            if ref.ephemeral:
                message = not_owned_message(claim, task)
                if message is not None:
                    return message
            volume = self._volume_of(claim)
            if volume is not None:
                out[volume] = None
        return list(out)

    def existing_volumes(self, task: Task) -> list[VolumeId]:
        """The volumes of a placed pod; claims that cannot be resolved are not counted."""
        cached = self._existing.get(task.uid)
        if cached is None:
            found: dict[VolumeId, None] = {}
            for ref in claim_refs(task):
                claim = self.view.claim(task.namespace, ref.name)
                if claim is None or (ref.ephemeral and not_owned_message(claim, task)):
                    continue
                volume = self._volume_of(claim)
                if volume is not None:
                    found[volume] = None
            cached = self._existing[task.uid] = list(found)
        return cached

    def count(self, task: Task, row: int, delta: int) -> None:
        if not self.limits:
            return
        for volume in self.existing_volumes(task):
            rows = self.rows_of.setdefault(volume, {})
            before = rows.get(row, 0)
            after = before + delta
            if after > 0:
                rows[row] = after
            else:
                rows.pop(row, None)
            if (before > 0) != (after > 0):
                distinct = self.distinct.get(volume[0])
                if distinct is None:
                    distinct = self.distinct[volume[0]] = np.zeros(self.view.n, dtype=np.int64)
                distinct[row] += 1 if after > 0 else -1

    def placed(self, task: Task) -> None:
        if task.node >= 0:
            self._placed[task.uid] = task.node
            self.count(task, task.node, 1)

    def unplaced(self, task: Task) -> None:
        row = self._placed.pop(task.uid, task.node)
        if row >= 0:
            self.count(task, row, -1)

    def over_limit(self, volumes: Sequence[VolumeId]) -> BoolArray:
        """Nodes where the volumes not attached yet would exceed a driver's limit."""
        bad = np.zeros(self.view.n, dtype=bool)
        by_driver: dict[str, list[VolumeId]] = {}
        for volume in volumes:
            by_driver.setdefault(volume[0], []).append(volume)
        for driver, mine in by_driver.items():
            limit = self.limits.get(driver)
            if limit is None:
                continue
            new = np.full(self.view.n, len(mine), dtype=np.int64)
            for volume in mine:
                rows = self.rows_of.get(volume)
                if rows:
                    new[np.fromiter(rows, dtype=np.intp, count=len(rows))] -= 1
            attached = self.distinct.get(driver)
            total = new if attached is None else attached + new
            bad |= total > limit
        return bad

    def over_limit_on(
        self, row: int, volumes: Sequence[VolumeId], removed: Sequence[Task], added: Sequence[Task]
    ) -> bool:
        """:meth:`over_limit` for one node with ``removed`` gone and ``added`` placed there."""
        changed: dict[VolumeId, int] = {}
        for tasks, delta in ((removed, -1), (added, 1)):
            for other in tasks:
                if delta < 0 and other.node != row:
                    continue
                for volume in self.existing_volumes(other):
                    changed[volume] = changed.get(volume, 0) + delta
        distinct = {d: int(a[row]) for d, a in self.distinct.items()}
        users: dict[VolumeId, int] = {}
        for volume, delta in changed.items():
            before = self.rows_of.get(volume, {}).get(row, 0)
            users[volume] = before + delta
            if (before > 0) != (before + delta > 0):
                distinct[volume[0]] = distinct.get(volume[0], 0) + (1 if before + delta > 0 else -1)
        new: dict[str, int] = {}
        for volume in volumes:
            in_use = users.get(volume, self.rows_of.get(volume, {}).get(row, 0))
            if in_use <= 0:
                new[volume[0]] = new.get(volume[0], 0) + 1
        for driver, count in new.items():
            limit = self.limits.get(driver)
            if limit is not None and distinct.get(driver, 0) + count > limit[row]:
                return True
        return False


def node_volume_limits_filter(ssn: SessionView) -> NodeFilter:
    """NodeVolumeLimits: per CSI driver, attached plus new volumes within CSINode's count."""
    attachments = _Attachments(StorageView(ssn))
    everywhere = np.ones(len(ssn.nodes), dtype=bool)

    def pre_filter(task: Task) -> PreFilterResult:
        return None if claim_refs(task) else SKIP

    def reject(task: Task) -> list[Rejection]:
        volumes = attachments.new_volumes(task)
        if isinstance(volumes, str):
            return [(volumes, everywhere)]
        if not volumes:
            return []
        bad = attachments.over_limit(volumes)
        return [(MAX_VOLUME_COUNT, bad)] if bad.any() else []

    def simulate(task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]) -> list[str]:
        volumes = attachments.new_volumes(task)
        if isinstance(volumes, str):
            return [volumes]
        if volumes and attachments.over_limit_on(row, volumes, removed, added):
            return [MAX_VOLUME_COUNT]
        return []

    return NodeFilter(
        "NodeVolumeLimits",
        reject,
        pre_filter=pre_filter,
        handler=EventHandler(allocate=attachments.placed, deallocate=attachments.unplaced),
        simulate=simulate,
    )
