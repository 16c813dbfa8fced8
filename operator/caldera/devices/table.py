"""One vendor's cards on every node as (nodes × cards) numpy arrays, with usage kept current.

HAMi fits a pod by walking every node's cards in Python. Here the walk's per-card checks (health,
cordon, model and mode, UUID selectors, sharing slots, mutex, memory, cores, exclusive use,
compute exhausted) are evaluated for all cards of all nodes at once, in HAMi's order, so each card
fails on the first check it fails, exactly as the walk counts it. For a pod whose cards come from
one container (or from init containers, which each see the node as it is), the number of cards
passing decides the node exactly as HAMi's walk would, because the walk takes every passing card
until it has enough; the per-node reason counts are HAMi's too. Pods the arrays cannot decide
alone (several app containers sharing the node, NUMA binding, a namespace quota) are screened
here and then fitted exactly, node by node, only on the nodes that survive. The exact per-card
choice (:func:`caldera.devices.fit.fit_node`) runs only for the node a pod is placed on.

Complexity per container request: O(N·G) numpy work for N nodes of at most G cards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from caldera.devices import mig
from caldera.devices.fit import MIG_MODE, CardUse, FitOptions, policy_words
from caldera.devices.model import UNSET_PERCENTAGE, Card, CardRequest

__all__ = ["Base", "DeviceTable", "Screen"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Screen = tuple[BoolArray, dict[str, IntArray]]
"""(node fits, per reason the number of cards that failed for it on each node)."""
Base = tuple[BoolArray, dict[str, IntArray]]
"""(cards passing the usage-independent checks, reason counts of those checks per node)."""


class DeviceTable:
    """The cards of one vendor, rows aligned with the snapshot's node table."""

    __slots__ = (
        "_empty_room",
        "at",
        "cards",
        "cordon",
        "count",
        "devcore",
        "devmem",
        "has_mig",
        "health",
        "ids",
        "kind",
        "kinds",
        "mig",
        "mig_room",
        "mine",
        "ncards",
        "placements",
        "used",
        "usedcores",
        "usedmem",
        "vendor",
        "width",
    )

    def __init__(
        self,
        vendor: str,
        cards: Sequence[Sequence[Card]],
        cordoned: Sequence[frozenset[str]],
    ) -> None:
        n = len(cards)
        g = max((len(c) for c in cards), default=0)
        self.vendor = vendor
        self.cards: list[tuple[Card, ...]] = [tuple(c) for c in cards]
        self.at: list[dict[str, int]] = [{c.id: j for j, c in enumerate(row)} for row in cards]
        self.width = g
        """Cards of the node with the most (0: no node registers any)."""
        shape = (n, g)
        self.count: IntArray = np.zeros(shape, dtype=np.int64)
        self.devmem: IntArray = np.zeros(shape, dtype=np.int64)
        self.devcore: IntArray = np.zeros(shape, dtype=np.int64)
        self.health: BoolArray = np.zeros(shape, dtype=bool)
        self.mine: BoolArray = np.zeros(shape, dtype=bool)
        """A card of this vendor (its model names the vendor); padding is False."""
        self.cordon: BoolArray = np.zeros(shape, dtype=bool)
        self.kind: IntArray = np.full(shape, -1, dtype=np.int64)
        """Index into :attr:`kinds` (model and mode) of every card."""
        self.ids: npt.NDArray[np.object_] = np.full(shape, "", dtype=object)
        self.mig: BoolArray = np.zeros(shape, dtype=bool)
        """A card in MIG mode (gives instances of its MIG profiles)."""
        self.kinds: list[tuple[str, str]] = []
        kind_ids: dict[tuple[str, str], int] = {}
        word = vendor.lower()
        for i, row in enumerate(cards):
            for j, c in enumerate(row):
                self.count[i, j], self.devmem[i, j], self.devcore[i, j] = (
                    c.count,
                    c.devmem,
                    c.devcore,
                )
                self.health[i, j] = c.health
                self.mine[i, j] = word in c.type.lower()
                self.cordon[i, j] = bool(cordoned) and c.id in cordoned[i]
                self.ids[i, j] = c.id
                self.mig[i, j] = c.mode == MIG_MODE
                key = (c.type, c.mode)
                self.kind[i, j] = kind_ids.setdefault(key, len(kind_ids))
        self.kinds = list(kind_ids)
        self.has_mig = bool(self.mig.any())
        self.ncards: IntArray = self.mine.sum(axis=1)
        self.used: IntArray = np.zeros(shape, dtype=np.int64)
        self.usedmem: IntArray = np.zeros(shape, dtype=np.int64)
        self.usedcores: IntArray = np.zeros(shape, dtype=np.int64)
        self.placements: dict[tuple[int, int], Counter[tuple[int, int]]] = {}
        """(row, card column) → the MIG instances on that card (start, size), as a multiset."""
        self.mig_room: IntArray = np.zeros(shape, dtype=np.int64)
        """The most memory one more MIG instance of the card may have: the largest profile with
        a free placement (0: none, or not a MIG card). ``selectMigCandidate`` finds an instance
        for a request of ``m`` MiB exactly when this is at least ``m``."""
        for i, row in enumerate(cards):
            for j, c in enumerate(row):
                if c.mode == MIG_MODE:
                    self.mig_room[i, j] = mig_room(c, ())
        self._empty_room = self.mig_room

    def fresh(self) -> DeviceTable:
        """A table of the same cards with nothing used, sharing this one's card columns (a
        session changes only the usage)."""
        out = object.__new__(DeviceTable)
        for slot in DeviceTable.__slots__:
            setattr(out, slot, getattr(self, slot))
        out.used = np.zeros_like(self.used)
        out.usedmem = np.zeros_like(self.usedmem)
        out.usedcores = np.zeros_like(self.usedcores)
        out.placements = {}
        out.mig_room = self._empty_room.copy() if self.has_mig else self._empty_room
        return out

    def held_instances(self, placements: dict[tuple[int, int], Counter[tuple[int, int]]]) -> None:
        """Take ``placements`` as the MIG instances the cards hold, each card's room with it."""
        self.placements = {cell: Counter(held) for cell, held in placements.items()}
        for cell in self.placements:
            self._room(cell)

    def _room(self, cell: tuple[int, int]) -> None:
        row, col = cell
        held = self.placements.get(cell)
        self.mig_room[row, col] = mig_room(
            self.cards[row][col], tuple(held.elements()) if held else ()
        )

    def __len__(self) -> int:
        return len(self.cards)

    # -- usage ---------------------------------------------------------------------------

    def uses(self, row: int) -> list[CardUse]:
        """The row's cards' usage as :func:`~caldera.devices.fit.fit_node` takes it."""
        n = len(self.cards[row])
        out = [
            CardUse(u, m, c)
            for u, m, c in zip(
                self.used[row, :n].tolist(),
                self.usedmem[row, :n].tolist(),
                self.usedcores[row, :n].tolist(),
                strict=True,
            )
        ]
        if self.placements:
            for j, use in enumerate(out):
                held = self.placements.get((row, j))
                if held:
                    use.placements = tuple(held.elements())
        return out

    def apply(self, row: int, usage: Mapping[str, CardUse], sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (-1) one pod's usage per card (:func:`pod_usage`) on node
        ``row``; cards the node does not register are ignored (§3.5)."""
        at = self.at[row]
        for uuid, use in usage.items():
            j = at.get(uuid)
            if j is None:
                continue
            self.used[row, j] += sign * use.used
            self.usedmem[row, j] += sign * use.usedmem
            self.usedcores[row, j] += sign * use.usedcores
            if use.placements:
                add_placements(self.placements, (row, j), use.placements, sign)
                self._room((row, j))

    # -- the vectorised walk -------------------------------------------------------------

    def node_scores(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """§5.1 on the given rows (0 where a total is 0)."""
        valid = self.kind[rows] >= 0

        def total(a: IntArray) -> IntArray:
            out: IntArray = np.where(valid, a[rows], 0).sum(axis=1)
            return out

        score = np.zeros(len(rows), dtype=np.float64)
        pairs = [
            (total(self.used), total(self.count)),
            (total(self.usedcores), total(self.devcore)),
            (total(self.usedmem), total(self.devmem)),
        ]
        ok = np.logical_and.reduce([t > 0 for _, t in pairs])
        for used, tot in pairs:
            score[ok] += used[ok] / tot[ok]
        return score * 10

    def base(self, opts: FitOptions, type_ok: BoolArray) -> Base:
        """The walk's checks that do not depend on usage (health, cordon, model and mode, UUID
        selectors): the cards still standing after them and the reason counts so far. Fixed for
        a session, so computed once per pod shape."""
        remaining = self.mine.copy()
        reasons: dict[str, IntArray] = {}
        ok_by_check = [
            ("CardNotHealth", self.health),
            ("CardCordoned", ~self.cordon),
            ("CardTypeMismatch", np.append(type_ok, False)[self.kind]),
        ]
        if opts.use_uuids or opts.nouse_uuids:
            ok = np.ones(self.ids.shape, dtype=bool)
            if opts.use_uuids:
                ok &= np.isin(self.ids, list(opts.use_uuids))
            if opts.nouse_uuids:
                ok &= ~np.isin(self.ids, list(opts.nouse_uuids))
            ok_by_check.append(("CardUuidMismatch", ok))
        for reason, ok in ok_by_check:
            counts = (remaining & ~ok).sum(axis=1)
            if counts.any():
                reasons[reason] = counts
            remaining &= ok
        return remaining, reasons

    def screen(
        self,
        request: CardRequest,
        opts: FitOptions,
        base: Base,
        rows: npt.NDArray[np.intp] | None = None,
    ) -> Screen:
        """One container's walk on every node (or on ``rows``): does it find ``request.nums``
        cards, and how many cards failed for each reason. ``base`` is :meth:`base` for the pod's
        options. NUMA binding and quota are left to the exact fit."""
        sel = slice(None) if rows is None else rows
        used, usedmem, usedcores = self.used[sel], self.usedmem[sel], self.usedcores[sel]
        devmem, devcore = self.devmem[sel], self.devcore[sel]
        remaining = base[0][sel]
        reasons: dict[str, IntArray] = {r: c[sel] for r, c in base[1].items()}

        def check(reason: str, ok: BoolArray) -> None:
            nonlocal remaining
            failed = remaining & ~ok
            if failed.any():
                counts = failed.sum(axis=1)
                before = reasons.get(reason)
                reasons[reason] = counts if before is None else before + counts
            remaining = remaining & ok

        check("CardTimeSlicingExhausted", self.count[sel] > used)
        if "mutex" in policy_words(opts.gpu_policy):
            check("ExclusiveDeviceAllocateConflict", used == 0)
        cores = min(request.coresreq, 100)
        mem: IntArray | int
        if request.memreq > 0:
            mem = request.memreq
        elif request.mem_percentage != UNSET_PERCENTAGE:
            mem = devmem * request.mem_percentage // 100
        else:
            mem = 0
        check("CardInsufficientMemory", devmem - usedmem >= mem)
        if not opts.soft_split:  # a soft split counts cores in percent: the exact walk checks
            check("CardInsufficientCore", devcore - usedcores >= cores)
            if cores == 100:
                check("ExclusiveDeviceAllocateConflict", ~((devcore == 100) & (used > 0)))
            if cores == 0:
                check("CardComputeUnitsExhausted", ~((devcore != 0) & (usedcores == devcore)))
        if self.has_mig:  # CustomFilterRule: an instance holding the memory has a placement
            check("CardMigTopologyInfeasible", ~self.mig[sel] | (self.mig_room[sel] >= mem))
        passing = remaining.sum(axis=1)
        fits = passing >= request.nums
        if self.has_mig and request.nums > 1:  # a MIG card may hold several: the walk decides
            fits |= (remaining & self.mig[sel]).any(axis=1)
        short = ~fits & (passing > 0)
        if short.any():
            reasons["AllocatedCardsInsufficientRequest"] = np.where(short, passing, 0)
        too_few = request.nums > self.ncards[sel]
        if self.has_mig:  # isMIGRequest: a node with MIG cards is not short of cards
            too_few &= ~self.mig[sel].any(axis=1)
        if too_few.any():
            # HAMi stops before the walk: the node's only reason is the missing devices
            for name in list(reasons):
                reasons[name] = np.where(too_few, 0, reasons[name])
            reasons["NodeInsufficientDevice"] = too_few.astype(np.int64)
            fits &= ~too_few
        return fits, reasons


def add_placements(
    store: dict[tuple[int, int], Counter[tuple[int, int]]],
    cell: tuple[int, int],
    placements: Sequence[tuple[int, int]],
    sign: int,
) -> None:
    """Add (``sign`` 1) or remove (-1) MIG instances of one card in ``store``."""
    held = store.setdefault(cell, Counter())
    for placement in placements:
        held[placement] += sign
        if held[placement] <= 0:
            del held[placement]
    if not held:
        del store[cell]


def mig_room(card: Card, occupied: Sequence[tuple[int, int]]) -> int:
    """The largest memory of the card's MIG profiles that still have a free placement."""
    free = [p.memory for p in card.mig_profiles if mig.place(p, occupied) is not None]
    return max(free, default=0)
