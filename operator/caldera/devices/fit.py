"""HAMi's per-node device fit, scores and card order (../shared/reference/hami.md §3.5, §4, §5).

Bit for bit what HAMi's scheduler decides for one node: the cards are scored and sorted by the GPU
policy, then walked **from the last to the first** (so the last-registered card wins a tie), each
failing card counting one reason; init containers are fitted each against a fresh copy of the
node's usage, app containers in order against one shared copy. The node's verdict is HAMi's
reason string (``"1/4 CardInsufficientMemory, 3/4 CardNotHealth"``). Usage is rebuilt from what
running pods were given, as HAMi rebuilds it.

Not here yet: topology-aware selection by pair score, MIG placement, namespace quota, and comma
chains of GPU policies other than ``numa`` grouping.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from caldera.devices.model import Card, CardRequest, Grant

__all__ = [
    "CardUse",
    "FitOptions",
    "NodeFit",
    "card_order",
    "card_score",
    "fit_node",
    "node_score",
    "reason_text",
    "usage_of",
]


@dataclass(slots=True)
class CardUse:
    used: int = 0
    """Containers on the card (sharing slots taken)."""
    usedmem: int = 0
    usedcores: int = 0

    def copy(self) -> CardUse:
        return CardUse(self.used, self.usedmem, self.usedcores)


@dataclass(frozen=True, slots=True)
class FitOptions:
    """What the pod (and the scheduler's defaults) say about where its cards may come from."""

    gpu_policy: str = "spread"
    numa_bind: bool = False
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    vgpu_mode: str | None = None
    use_uuids: frozenset[str] = frozenset()
    nouse_uuids: frozenset[str] = frozenset()
    cordoned: frozenset[str] = frozenset()
    weights: tuple[int, int, int] = (1, 1, 1)
    """(slot, core, memory) weights of the card score."""


@dataclass(slots=True)
class NodeFit:
    """One node's verdict: the grants per container (init containers first), or why not."""

    grants: list[list[Grant]] | None
    reason: str = ""
    counts: Counter[str] = field(default_factory=Counter)


def node_score(cards: Sequence[Card], uses: Sequence[CardUse]) -> float:
    """§5.1: 10 × (slots used + cores used + memory used, each as a share of the node's)."""
    count = sum(c.count for c in cards)
    cores = sum(c.devcore for c in cards)
    mem = sum(c.devmem for c in cards)
    if not count or not cores or not mem:
        return 0.0
    return 10 * (
        sum(u.used for u in uses) / count
        + sum(u.usedcores for u in uses) / cores
        + sum(u.usedmem for u in uses) / mem
    )


def card_score(
    card: Card, use: CardUse, request: CardRequest, weights: tuple[int, int, int]
) -> float:
    """§5.2, quirk included: the request counts only when the card's type is the vendor word."""
    req = mem = cores = 0
    if request.vendor == card.type:
        req, mem, cores = 1, request.memory_on(card), request.coresreq
    if not card.count or not card.devcore or not card.devmem:
        return 0.0
    slot_w, core_w, mem_w = weights
    return 10 * (
        slot_w * (req + use.used) / card.count
        + core_w * (cores + use.usedcores) / card.devcore
        + mem_w * (mem + use.usedmem) / card.devmem
    )


def card_order(
    cards: Sequence[Card], uses: Sequence[CardUse], request: CardRequest, opts: FitOptions
) -> list[int]:
    """§5.3: the cards' indexes in HAMi's sorted order (Fit walks it from the end). The sort is
    stable, as Go's insertion sort is on the small lists a node has: equal cards keep their
    registration order."""
    scores = [card_score(c, u, request, opts.weights) for c, u in zip(cards, uses, strict=True)]
    policy = {p.strip() for p in opts.gpu_policy.split(",")}
    if "mutex" in policy:
        return sorted(range(len(cards)), key=lambda i: -uses[i].used)
    binpack = "binpack" in policy
    if opts.numa_bind:
        if binpack:
            return sorted(range(len(cards)), key=lambda i: (-cards[i].numa, scores[i]))
        return sorted(range(len(cards)), key=lambda i: (cards[i].numa, -scores[i]))
    if binpack:
        return sorted(range(len(cards)), key=lambda i: (scores[i], cards[i].numa))
    return sorted(range(len(cards)), key=lambda i: (-scores[i], cards[i].numa))


def _type_ok(card: Card, request: CardRequest, opts: FitOptions, vendor: str) -> bool:
    model = card.type.lower()
    if opts.use_types and not any(t.lower() in model for t in opts.use_types):
        return False
    if any(t.lower() in model for t in opts.nouse_types):
        return False
    if opts.vgpu_mode is not None and card.mode not in opts.vgpu_mode:
        return False
    return request.vendor == vendor


def _fit_container(
    cards: Sequence[Card], uses: list[CardUse], request: CardRequest, opts: FitOptions, vendor: str
) -> tuple[list[Grant] | None, Counter[str]]:
    """§4.2: the cards for one container, or the reasons each card said no."""
    reasons: Counter[str] = Counter()
    nums = request.nums
    taken: list[Grant] = []
    prev_numa: int | None = None
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if card.id in opts.cordoned:
            reasons["CardCordoned"] += 1
            continue
        if not _type_ok(card, request, opts, vendor):
            reasons["CardTypeMismatch"] += 1
            continue
        if opts.numa_bind and prev_numa is not None and card.numa != prev_numa:
            if taken:
                reasons["NumaNotFit"] += len(taken)
            taken, nums = [], request.nums
        prev_numa = card.numa
        if (opts.use_uuids and card.id not in opts.use_uuids) or card.id in opts.nouse_uuids:
            reasons["CardUuidMismatch"] += 1
            continue
        if card.count <= use.used:
            reasons["CardTimeSlicingExhausted"] += 1
            continue
        if "mutex" in opts.gpu_policy and use.used > 0:
            reasons["ExclusiveDeviceAllocateConflict"] += 1
            continue
        cores = min(request.coresreq, 100)
        mem = request.memory_on(card)
        if card.devmem - use.usedmem < mem:
            reasons["CardInsufficientMemory"] += 1
            continue
        if card.devcore - use.usedcores < cores:
            reasons["CardInsufficientCore"] += 1
            continue
        if card.devcore == 100 and cores == 100 and use.used > 0:
            reasons["ExclusiveDeviceAllocateConflict"] += 1
            continue
        if card.devcore != 0 and use.usedcores == card.devcore and cores == 0:
            reasons["CardComputeUnitsExhausted"] += 1
            continue
        taken.append(Grant(card.id, request.vendor, mem, cores))
        nums -= 1
        if nums == 0:
            return taken, reasons
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] += len(taken)
    return None, reasons


def _take(cards: Sequence[Card], uses: list[CardUse], grants: Sequence[Grant]) -> None:
    at = {c.id: i for i, c in enumerate(cards)}
    for g in grants:
        use = uses[at[g.uuid]]
        use.used += 1
        use.usedmem += g.memory
        use.usedcores += g.cores


def reason_text(reasons: Counter[str], total: int) -> str:
    """HAMi's GenReason: ``"<n>/<cards> <Reason>"``, sorted, joined with ``", "``."""
    return ", ".join(sorted(f"{n}/{total} {reason}" for reason, n in reasons.items()))


def fit_node(
    cards: Sequence[Card],
    uses: Sequence[CardUse],
    requests: Sequence[tuple[bool, CardRequest | None]],
    opts: FitOptions,
    vendor: str = "NVIDIA",
) -> NodeFit:
    """§4.1 for one node and one vendor (the cards whose model names it): ``requests`` is (is an
    init container, its request) per container, init containers first. ``uses`` is not changed."""
    ours = [i for i, c in enumerate(cards) if vendor.lower() in c.type.lower()]
    own = [cards[i] for i in ours]
    shared = [uses[i].copy() for i in ours]
    grants: list[list[Grant]] = []
    for init, request in requests:
        if request is None:
            grants.append([])
            continue
        if request.nums > len(own):
            counts = Counter({"NodeInsufficientDevice": 1})
            return NodeFit(None, reason_text(counts, len(own)), counts)
        # each init container sees the node as it is; app containers see each other
        pool = [uses[i].copy() for i in ours] if init else shared
        chosen, reasons = _fit_container(own, pool, request, opts, vendor)
        if chosen is None:
            return NodeFit(None, reason_text(reasons, len(own)), reasons)
        if not init:
            _take(own, shared, chosen)
        grants.append(chosen)
    return NodeFit(grants)


def usage_of(
    cards: Sequence[Card], pods: Sequence[tuple[int, Sequence[Sequence[Grant]]]]
) -> list[CardUse]:
    """§3.5: each card's usage from what pods were given; ``pods`` holds, per running pod, its
    number of init containers and its grants per container (init containers first). Grants on
    cards the node does not register are ignored."""
    at = {c.id: i for i, c in enumerate(cards)}
    uses = [CardUse() for _ in cards]
    for inits, containers in pods:
        app: dict[int, CardUse] = {}
        peak: dict[int, CardUse] = {}
        for n, grants in enumerate(containers):
            for g in grants:
                i = at.get(g.uuid)
                if i is None:
                    continue
                if n < inits:
                    p = peak.setdefault(i, CardUse(used=1))
                    p.usedmem, p.usedcores = max(p.usedmem, g.memory), max(p.usedcores, g.cores)
                else:
                    a = app.setdefault(i, CardUse())
                    a.used += 1
                    a.usedmem += g.memory
                    a.usedcores += g.cores
        for i in app.keys() | peak.keys():
            a, p = app.get(i, CardUse()), peak.get(i, CardUse())
            uses[i].used += max(a.used, p.used)
            uses[i].usedmem += max(a.usedmem, p.usedmem)
            uses[i].usedcores += max(a.usedcores, p.usedcores)
    return uses
