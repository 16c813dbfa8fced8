"""VolumeBinding: a pod's claims must be bound to, or bindable to, volumes its node can use.

kube-scheduler's plugin, as Volcano's predicates plugin runs it (PreFilter, Filter, Reserve and
Unreserve on the allocate and deallocate events, PreBind in the binder, Score):

- **PreFilter.** A pod without claim-backed volumes skips the plugin. A missing claim, a ``Lost``
  or deleting claim, or an ephemeral volume's claim the pod does not control makes the pod
  unschedulable with kube's message. A claim is *bound* when it names a volume and the PV
  controller marked it ``pv.kubernetes.io/bind-completed``; an unbound claim whose class is not
  ``WaitForFirstConsumer`` (no class, a missing class, ``Immediate``, or pre-bound through
  ``volumeName``) gives ``pod has unbound immediate PersistentVolumeClaims``.
- **Filter.** A bound claim's volume must admit the node (``node(s) had volume node affinity
  conflict``; a volume that does not exist: ``node(s) unavailable due to one or more pvc(s) bound
  to non-existent pv(s)``). Each unbound ``WaitForFirstConsumer`` claim, smallest request first,
  takes the smallest available volume of its class that fits it (capacity, access modes, volume
  mode and attributes class, selector, node affinity, not claimed by another claim; a volume
  pre-bound to the claim wins outright) or else must be provisionable on the node (a provisioner
  other than ``kubernetes.io/no-provisioner`` whose allowed topologies admit the node); a claim
  already given a node (``volume.kubernetes.io/selected-node``) fits only there. Otherwise:
  ``node(s) didn't find available persistent volumes to bind``. Storage capacity
  (CSIStorageCapacity) is not modelled, so ``node(s) did not have enough free storage`` never
  appears.
- **Reserve/Unreserve.** When a task is placed, the volumes chosen for its node are taken for its
  claims (no other claim can have them this session) and claims to provision are given that node;
  deallocating gives them back. The decisions travel with the task's Bind intent, and the
  operator's binder writes them before binding the pod (PreBind).
- **Score.** Capacity utilisation of the chosen static volumes, per class, through the default
  shape (0 % → 100, 100 % → 0), weight ``volumebinding.weight``. Kubernetes 1.36 runs it only with
  the StorageCapacityScoring feature gate, alpha and off by default until 1.37, so it is off here
  too (:data:`STORAGE_CAPACITY_SCORING`).

Which volume each claim takes on every node is :mod:`~caldera.plugins.predicates.volume_matching`'s
job. Score and Reserve reuse the same evaluation; masks of volume affinities and allowed
topologies are cached per session.

Complexity per task: O(B·N) for B bound claims, plus, for C unbound claims, C times
:class:`~caldera.plugins.predicates.volume_matching.VolumeMatcher`'s per-claim cost
(O(K log K + C·N) for the K (volume, node) pairs of its pools).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task, TaskStatus
from caldera.framework.intents import Bind, VolumeBind
from caldera.framework.interfaces import EventHandler, Rejection, SessionView
from caldera.framework.scoring import NodeScorer
from caldera.models.storage import (
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    PersistentVolume,
    PersistentVolumeClaim,
    claim_class,
    volume_class,
)
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult
from caldera.plugins.predicates.volume_matching import VolumeMatcher
from caldera.plugins.predicates.volumes import StorageView, claim_refs, not_owned_message

__all__ = [
    "BIND_CONFLICT",
    "DEFAULT_SHAPE",
    "NODE_CONFLICT",
    "PV_NOT_EXIST",
    "STORAGE_CAPACITY_SCORING",
    "UNBOUND_IMMEDIATE",
    "VolumeBinding",
    "capacity_score",
]

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

STORAGE_CAPACITY_SCORING = False
"""The StorageCapacityScoring feature gate as Kubernetes 1.36 ships it (alpha, off)."""
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, 100), (100, 0))
"""VolumeBindingArgs' default shape with the gate on ({0, 10}, {100, 0}), scaled by
MaxNodeScore / MaxCustomPriorityScore = 10."""

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class _Claims:
    """The pod's claims as PreFilter sorts them."""

    bound: tuple[PersistentVolumeClaim, ...]
    delayed: tuple[PersistentVolumeClaim, ...]
    """Unbound claims of ``WaitForFirstConsumer`` classes, in volume order."""


@dataclass(slots=True)
class _Match:
    """FindPodVolumes over every node."""

    node_conflict: BoolArray
    pv_missing: BoolArray
    bind_conflict: BoolArray
    selected: tuple[PersistentVolumeClaim, ...]
    """Claims already given a node (they are provisioned there)."""
    matching: tuple[PersistentVolumeClaim, ...]
    """The other unbound claims, smallest request first."""
    picks: list[IntArray]
    """Per claim of ``matching``, the volume it takes on each node (-1: none)."""


@dataclass(frozen=True, slots=True)
class _Decision:
    """What Reserve assumed for a placed task."""

    node: str
    static: tuple[tuple[PersistentVolumeClaim, PersistentVolume], ...]
    provision: tuple[PersistentVolumeClaim, ...]


@dataclass(slots=True)
class _Hold:
    """A claim given a node this session, and the tasks holding that assumption."""

    node: str
    holders: set[str]


def _broken_linear(shape: Sequence[tuple[int, int]], p: Int64Array) -> Int64Array:
    """kube's BuildBrokenLinearFunction with Go's integer division (truncating toward zero)."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(shape):
        here = ~done & (p <= u)
        if i == 0:
            out[here] = s
        else:
            u0, s0 = shape[i - 1]
            num = (s - s0) * (p[here] - u0)
            out[here] = s0 + np.sign(num) * (np.abs(num) // (u - u0))
        done |= here
    return out


def capacity_score(
    requested: Sequence[Int64Array],
    capacity: Sequence[Int64Array],
    present: Sequence[BoolArray],
    shape: Sequence[tuple[int, int]] = DEFAULT_SHAPE,
) -> Int64Array:
    """kube's volume capacity scorer over rows: per class (requested and capacity summed over
    its static bindings, present where the class has one) the shaped utilisation, averaged over
    the classes present and rounded half away from zero; 0 where no class is present."""
    if not present:
        return np.zeros(0, dtype=np.int64)
    total = np.zeros(present[0].shape, dtype=np.int64)
    classes = np.zeros(present[0].shape, dtype=np.int64)
    for req, cap, here in zip(requested, capacity, present, strict=True):
        full = (cap == 0) | (req > cap)
        utilisation = np.where(full, 100, req * 100 // np.maximum(cap, 1))
        total += np.where(here, _broken_linear(shape, utilisation), 0)
        classes += here
    mean = total / np.maximum(classes, 1)
    return np.where(classes > 0, np.floor(mean + 0.5), 0).astype(np.int64)


class VolumeBinding:
    """The plugin for one session: its node filter, Reserve/Unreserve handler, scorer, and the
    decisions to hand to the binder."""

    def __init__(
        self,
        ssn: SessionView,
        weight: int = 1,
        shape: Sequence[tuple[int, int]] = DEFAULT_SHAPE,
    ) -> None:
        self.view = StorageView(ssn)
        self.weight = weight
        self.shape = tuple(shape)
        self.volumes = VolumeMatcher(self.view)
        self._claims: dict[str, _Claims | str | None] = {}
        self._selected: dict[str, _Hold] = {}
        """Claim → the node it is to be provisioned on, assumed this session."""
        self.decisions: dict[str, _Decision] = {}
        self.node_filter = NodeFilter(
            "VolumeBinding",
            self._reject,
            pre_filter=self._pre_filter,
            handler=EventHandler(allocate=self._reserve, deallocate=self._unreserve),
        )

    # -- PreFilter ------------------------------------------------------------------------------

    def _classify(self, task: Task) -> _Claims | str | None:
        """None: no claims (skip); a message: unschedulable; else the claims sorted."""
        refs = claim_refs(task)
        if not refs:
            return None
        claims: list[PersistentVolumeClaim] = []
        for ref in refs:
            claim = self.view.claim(task.namespace, ref.name)
            if claim is None:
                if ref.ephemeral:
                    return (
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{ref.name}"'
                    )
                return f'persistentvolumeclaim "{ref.name}" not found'
            if claim.status.phase == "Lost":
                return (
                    f'persistentvolumeclaim "{ref.name}" bound to non-existent '
                    f'persistentvolume "{claim.spec.volume_name}"'
                )
            if claim.metadata.deletion_timestamp is not None:
                return f'persistentvolumeclaim "{ref.name}" is being deleted'
            if ref.ephemeral:
                message = not_owned_message(claim, task)
                if message is not None:
                    return message
            claims.append(claim)
        bound, delayed, immediate = [], [], False
        classes = self.view.objects.classes
        for claim in claims:
            if claim.fully_bound:
                bound.append(claim)
                continue
            storage_class = classes.get(claim_class(claim))
            waits = (
                storage_class is not None
                and storage_class.volume_binding_mode == "WaitForFirstConsumer"
            )
            if waits and not claim.spec.volume_name:
                delayed.append(claim)
            else:
                immediate = True
        if immediate:
            return UNBOUND_IMMEDIATE
        return _Claims(tuple(bound), tuple(delayed))

    def _claims_of(self, task: Task) -> _Claims | str | None:
        if task.uid not in self._claims:
            self._claims[task.uid] = self._classify(task)
        return self._claims[task.uid]

    def _pre_filter(self, task: Task) -> PreFilterResult:
        claims = self._claims_of(task)
        if claims is None:
            return SKIP
        return claims if isinstance(claims, str) else None

    # -- FindPodVolumes -------------------------------------------------------------------------

    def _provisionable(self, claim: PersistentVolumeClaim) -> BoolArray:
        """Nodes the claim's class can provision it for."""
        storage_class = self.view.objects.classes.get(claim_class(claim))
        if storage_class is None or storage_class.provisioner in ("", NO_PROVISIONER):
            return np.zeros(self.view.n, dtype=bool)
        return self.view.allowed_topologies(storage_class.allowed_topologies)

    def _selected_node(self, claim: PersistentVolumeClaim) -> str | None:
        held = self._selected.get(claim.key)
        if held is not None:
            return held.node
        return claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION)

    def _match(self, claims: _Claims) -> _Match:
        n = self.view.n
        node_conflict = np.zeros(n, dtype=bool)
        pv_missing = np.zeros(n, dtype=bool)
        decided = np.zeros(n, dtype=bool)
        for claim in claims.bound:
            volume = self.volumes.index.get(claim.spec.volume_name)
            if volume is None:
                pv_missing = ~decided
                break
            conflict = ~self.volumes.affinity(volume) & ~decided
            node_conflict |= conflict
            decided |= conflict
        live = np.ones(n, dtype=bool)
        selected, matching = [], []
        for claim in claims.delayed:
            node = self._selected_node(claim)
            if node is None:
                matching.append(claim)
            else:
                live &= self.view.names == node
                selected.append(claim)
        matching.sort(key=lambda c: c.request)
        picks: list[IntArray] = []
        for claim in matching:
            picks.append(self.volumes.pick(claim, picks, live))
        fits = live.copy()
        for claim in selected:
            fits &= self._provisionable(claim)
        for claim, pick in zip(matching, picks, strict=True):
            fits &= (pick >= 0) | self._provisionable(claim)
        return _Match(node_conflict, pv_missing, ~fits, tuple(selected), tuple(matching), picks)

    def _reject(self, task: Task) -> list[Rejection]:
        claims = self._claims_of(task)
        if claims is None:
            return []
        if isinstance(claims, str):
            return [(claims, np.ones(self.view.n, dtype=bool))]
        found = self._match(claims)
        out = [
            (NODE_CONFLICT, found.node_conflict),
            (BIND_CONFLICT, found.bind_conflict),
            (PV_NOT_EXIST, found.pv_missing),
        ]
        return [(reason, mask) for reason, mask in out if mask.any()]

    # -- Reserve / Unreserve ----------------------------------------------------------------------

    def _reserve(self, task: Task) -> None:
        row = task.node
        if row < 0 or task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            return
        claims = self._claims_of(task)
        if not isinstance(claims, _Claims) or not claims.delayed:
            return
        found = self._match(claims)
        static = tuple(
            (claim, self.volumes.pvs[int(pick[row])])
            for claim, pick in zip(found.matching, found.picks, strict=True)
            if pick[row] >= 0
        )
        provision = found.selected + tuple(
            c for c, pick in zip(found.matching, found.picks, strict=True) if pick[row] < 0
        )
        node = self.view.nodes.names[row]
        for claim, pv in static:
            self.volumes.take(self.volumes.index[pv.metadata.name], claim.key, task.uid)
        for claim in provision:
            held = self._selected.setdefault(claim.key, _Hold(node, set()))
            held.holders.add(task.uid)
        self.decisions[task.uid] = _Decision(node, static, provision)

    def _unreserve(self, task: Task) -> None:
        decision = self.decisions.pop(task.uid, None)
        if decision is None:
            return
        for _claim, pv in decision.static:
            self.volumes.give_back(self.volumes.index[pv.metadata.name], task.uid)
        for claim in decision.provision:
            held = self._selected.get(claim.key)
            if held is not None:
                held.holders.discard(task.uid)
                if not held.holders:
                    del self._selected[claim.key]

    # -- PreBind: the decisions for the binder ----------------------------------------------------

    def pre_bind(self, bind: Bind) -> Bind:
        """The bind of a task with volume decisions, with its :class:`VolumeBind` writes."""
        decision = self.decisions.get(bind.uid)
        if decision is None:
            return bind
        writes = [
            VolumeBind(
                namespace=claim.metadata.namespace,
                claim=claim.metadata.name,
                claim_uid=claim.metadata.uid,
                claim_resource_version=claim.metadata.resource_version,
                volume=pv.metadata.name,
                volume_resource_version=pv.metadata.resource_version,
                prebound=pv.spec.claim_ref is not None,
            )
            for claim, pv in decision.static
        ]
        writes += [
            VolumeBind(
                namespace=claim.metadata.namespace,
                claim=claim.metadata.name,
                claim_uid=claim.metadata.uid,
                claim_resource_version=claim.metadata.resource_version,
            )
            for claim in decision.provision
        ]
        return replace(bind, volumes=tuple(writes))

    # -- Score ----------------------------------------------------------------------------------

    def scorer(self) -> NodeScorer | None:
        """The weighted Score as a batch scorer, when the feature gate and the weight allow."""
        if not STORAGE_CAPACITY_SCORING or not self.weight:
            return None
        return NodeScorer(self.score)

    def score(self, task: Task, rows: IntArray) -> npt.NDArray[np.float64]:
        claims = self._claims_of(task)
        if not isinstance(claims, _Claims) or not claims.delayed:
            return np.zeros(len(rows), dtype=np.float64)
        found = self._match(claims)
        by_class: dict[str, tuple[Int64Array, Int64Array, BoolArray]] = {}
        for claim, full_pick in zip(found.matching, found.picks, strict=True):
            pick = full_pick[rows]
            for volume in np.unique(pick[pick >= 0]):
                pv = self.volumes.pvs[int(volume)]
                here = pick == volume
                req, cap, present = by_class.setdefault(
                    volume_class(pv),
                    (
                        np.zeros(len(rows), dtype=np.int64),
                        np.zeros(len(rows), dtype=np.int64),
                        np.zeros(len(rows), dtype=bool),
                    ),
                )
                req[here] += claim.request
                cap[here] += pv.storage
                present |= here
        if not by_class:
            return np.zeros(len(rows), dtype=np.float64)
        groups = list(by_class.values())
        scores = capacity_score(
            [g[0] for g in groups], [g[1] for g in groups], [g[2] for g in groups], self.shape
        )
        return scores.astype(np.float64) * self.weight
