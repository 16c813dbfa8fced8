"""FindMatchingVolume for every node at once: which volume each unbound claim would take.

kube's FindMatchingVolume looks, for one claim and one node, through the volumes of the claim's
class: a volume pre-bound to the claim (its ``claimRef`` names it) wins if it admits the node, and
otherwise the smallest volume (ties: the name that sorts first) that is ``Available``, names no
claim, is at least as large as the request, has the claim's volume mode and attributes class and
every access mode it asks for, matches its selector and admits the node. A pod's claims are
matched in turn, and a volume an earlier claim took on that node is skipped.

Asking that per node and claim would cost O(volumes) each. Instead the candidates are grouped
once per session into pools (class, volume mode, attributes class, access modes), each sorted by
(capacity, name), so a claim's candidates are a suffix of every compatible pool (a binary search
on its request). Within a pool, of the volumes that admit every node only the first C+1 not
excluded can be picked for a pod's C earlier claims; the others are stored as (position, admitted
node row) pairs, and the best volume of every node is the first eligible pair of its row: one
vectorised pass. Volumes taken this session (:meth:`VolumeMatcher.take`) are masked out of the
pools; for the claim they were taken for they count as pre-bound.

Complexity per claim: O(K log K + (C+1)·N) numpy work for the K (volume, node) pairs of its
compatible pools and N nodes, plus a binary search per pool.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from caldera.models.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    claim_class,
    volume_class,
)
from caldera.plugins.predicates.volumes import StorageView

__all__ = ["VolumeMatcher"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
Int64Array = npt.NDArray[np.int64]
_NONE = np.iinfo(np.intp).max


@dataclass(slots=True)
class _Pool:
    """Unclaimed ``Available`` volumes of one class, volume mode, attributes class and set of
    access modes, by (capacity, name)."""

    volume_mode: str
    attributes: str
    access_modes: frozenset[str]
    members: IntArray
    """Volume indices, smallest first."""
    storage: Int64Array
    everywhere: list[int]
    """Positions (in ``members``) of the volumes that admit every node."""
    pair_pos: IntArray
    """With ``pair_row``: the nodes the other volumes admit, by position."""
    pair_row: IntArray
    pair_volume: IntArray = field(init=False)

    def __post_init__(self) -> None:
        self.pair_volume = self.members[self.pair_pos]


@dataclass(slots=True)
class _Hold:
    claim: str
    holders: set[str]


class VolumeMatcher:
    """The session's volumes, their pools, and the volumes taken this session."""

    def __init__(self, view: StorageView) -> None:
        self.view = view
        objects = view.objects
        self.pvs: list[PersistentVolume] = [objects.volumes[k] for k in sorted(objects.volumes)]
        self.index = {pv.metadata.name: i for i, pv in enumerate(self.pvs)}
        order = sorted(range(len(self.pvs)), key=lambda i: self.pvs[i].storage)
        self._by_rank = np.array(order, dtype=np.intp)
        """Volume indices by (capacity, name) (the volumes are indexed in name order)."""
        self._rank = np.empty(len(self.pvs), dtype=np.intp)
        self._rank[self._by_rank] = np.arange(len(self.pvs), dtype=np.intp)
        self._by_class: dict[str, list[int]] = {}
        self._claimed: dict[str, list[int]] = {}
        """``namespace/name`` of a claim → volumes whose ``claimRef`` names it."""
        for i, pv in enumerate(self.pvs):
            self._by_class.setdefault(volume_class(pv), []).append(i)
            ref = pv.spec.claim_ref
            if ref is not None:
                self._claimed.setdefault(f"{ref.namespace}/{ref.name}", []).append(i)
        self._pools: dict[str, list[_Pool]] = {}
        self._compatible: dict[str, list[_Pool]] = {}
        self._selected: dict[tuple[str, int], BoolArray] = {}
        self._taken: dict[int, _Hold] = {}
        self._taken_for: dict[str, set[int]] = {}
        """Claim → the volumes taken for it this session."""
        self._taken_mask = np.zeros(len(self.pvs), dtype=bool)

    # -- the session's assumptions ------------------------------------------------------------

    def take(self, volume: int, claim: str, uid: str) -> None:
        """Task ``uid`` takes ``volume`` for ``claim`` (several tasks may share a claim)."""
        held = self._taken.get(volume)
        if held is None:
            self._taken[volume] = _Hold(claim, {uid})
            self._taken_for.setdefault(claim, set()).add(volume)
            self._taken_mask[volume] = True
        else:
            held.holders.add(uid)

    def give_back(self, volume: int, uid: str) -> None:
        held = self._taken.get(volume)
        if held is not None:
            held.holders.discard(uid)
            if not held.holders:
                del self._taken[volume]
                self._taken_mask[volume] = False
                others = self._taken_for[held.claim]
                others.discard(volume)
                if not others:
                    del self._taken_for[held.claim]

    # -- masks -------------------------------------------------------------------------------

    def affinity(self, volume: int, *, keep: bool = True) -> BoolArray:
        """The nodes the volume's node affinity admits (cached with ``keep``)."""
        affinity = self.pvs[volume].spec.node_affinity
        selector = None if affinity is None else affinity.required
        return self.view.volume_affinity(selector, keep=keep)

    def _pool_list(self, class_name: str) -> list[_Pool]:
        pools = self._pools.get(class_name)
        if pools is not None:
            return pools
        groups: dict[tuple[frozenset[str], str, str], list[int]] = {}
        for i in self._by_class.get(class_name, []):
            pv = self.pvs[i]
            if (
                pv.spec.claim_ref is not None
                or pv.status.phase != "Available"
                or pv.metadata.deletion_timestamp is not None
            ):
                continue
            key = (
                frozenset(pv.spec.access_modes),
                pv.spec.volume_mode or "Filesystem",
                pv.spec.volume_attributes_class_name or "",
            )
            groups.setdefault(key, []).append(i)
        pools = self._pools[class_name] = []
        for (modes, volume_mode, attributes), members in groups.items():
            members.sort(key=lambda i: self._rank[i])
            everywhere: list[int] = []
            positions: list[IntArray] = []
            rows: list[IntArray] = []
            for pos, i in enumerate(members):
                admitted = self.affinity(i, keep=False)  # kept as pairs below
                if admitted.all():
                    everywhere.append(pos)
                else:
                    found = np.flatnonzero(admitted)
                    positions.append(np.full(len(found), pos, dtype=np.intp))
                    rows.append(found)
            pool = _Pool(
                volume_mode,
                attributes,
                modes,
                np.array(members, dtype=np.intp),
                np.array([self.pvs[i].storage for i in members], dtype=np.int64),
                everywhere,
                np.concatenate(positions) if positions else np.zeros(0, dtype=np.intp),
                np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp),
            )
            pools.append(pool)
        return pools

    def _pools_for(self, claim: PersistentVolumeClaim) -> list[_Pool]:
        hit = self._compatible.get(claim.key)
        if hit is None:
            spec = claim.spec
            volume_mode = spec.volume_mode or "Filesystem"
            attributes = spec.volume_attributes_class_name or ""
            modes = set(spec.access_modes)
            hit = self._compatible[claim.key] = [
                pool
                for pool in self._pool_list(claim_class(claim))
                if (pool.volume_mode, pool.attributes) == (volume_mode, attributes)
                and modes <= pool.access_modes
            ]
        return hit

    def _selector_ok(self, claim: PersistentVolumeClaim, pool: _Pool) -> BoolArray | None:
        """Per pool position, whether the volume matches the claim's selector (None: no
        selector)."""
        selector = claim.spec.selector
        if selector is None:
            return None
        key = (claim.key, id(pool))
        hit = self._selected.get(key)
        if hit is None:
            hit = self._selected[key] = np.array(
                [selector.matches(self.pvs[i].metadata.labels) for i in pool.members], dtype=bool
            )
        return hit

    def prebound(self, claim: PersistentVolumeClaim) -> list[int]:
        """Volumes pre-bound to the claim that pass its node-independent checks, by name: those
        whose ``claimRef`` names it and those taken for it this session."""
        meta, spec = claim.metadata, claim.spec
        key = claim.key
        out = set(self._taken_for.get(key, ()))
        for i in self._claimed.get(key, []):
            pv = self.pvs[i]
            ref = pv.spec.claim_ref
            if ref is None or (ref.uid and ref.uid != meta.uid):
                continue
            if volume_class(pv) != claim_class(claim):
                continue
            if (
                pv.storage >= claim.request
                and (pv.spec.volume_mode or "Filesystem") == (spec.volume_mode or "Filesystem")
                and (pv.spec.volume_attributes_class_name or "")
                == (spec.volume_attributes_class_name or "")
                and pv.metadata.deletion_timestamp is None
            ):
                out.add(i)
        return sorted(out)

    # -- FindMatchingVolume ------------------------------------------------------------------

    def pick(
        self, claim: PersistentVolumeClaim, earlier: list[IntArray], live: BoolArray
    ) -> IntArray:
        """Per node, the volume the claim takes (-1: none) where ``live``, the volumes
        ``earlier`` (per node, for the pod's earlier claims) excluded."""
        n = self.view.n
        pick = np.full(n, -1, dtype=np.intp)
        undecided = live.copy()

        def chosen(volume: int) -> BoolArray:
            out = np.zeros(n, dtype=bool)
            for other in earlier:
                out |= other == volume
            return out

        for volume in self.prebound(claim):
            here = undecided & ~chosen(volume)
            pick[here & self.affinity(volume)] = volume
            undecided &= ~here
        if not undecided.any():
            return pick
        best = np.full(n, _NONE, dtype=np.intp)
        for pool in self._pools_for(claim):
            start = int(np.searchsorted(pool.storage, claim.request, side="left"))
            ok = self._selector_ok(claim, pool)
            eligible = (pool.pair_pos >= start) & ~self._taken_mask[pool.pair_volume]
            if ok is not None:
                eligible &= ok[pool.pair_pos]
            for other in earlier:
                eligible &= other[pool.pair_row] != pool.pair_volume
            if eligible.any():
                rows, first = np.unique(pool.pair_row[eligible], return_index=True)
                ranks = self._rank[pool.pair_volume[eligible][first]]
                best[rows] = np.minimum(best[rows], ranks)
            anywhere = np.full(n, _NONE, dtype=np.intp)
            wanted = len(earlier) + 1
            for pos in pool.everywhere[bisect_left(pool.everywhere, start) :]:
                if not wanted:
                    break
                volume = int(pool.members[pos])
                if self._taken_mask[volume] or (ok is not None and not ok[pos]):
                    continue
                wanted -= 1
                free = (anywhere == _NONE) & ~chosen(volume)
                anywhere[free] = self._rank[volume]
            best = np.minimum(best, anywhere)
        found = undecided & (best != _NONE)
        pick[found] = self._by_rank[best[found]]
        return pick
