"""HAMi's per-node device fit, scores and card order (../shared/reference/hami.md §3.5, §4, §5).

Bit for bit what HAMi's scheduler decides for one node: the cards are scored and sorted by the GPU
policy, then walked **from the last to the first** (so the last-registered card wins a tie), each
failing card counting one reason; init containers are fitted each against a fresh copy of the
node's usage, app containers in order against one shared copy. The node's verdict is HAMi's
reason string (``"1/4 CardInsufficientMemory, 3/4 CardNotHealth"``). Usage is rebuilt from what
running pods were given, as HAMi rebuilds it.

Topology-aware selection uses the node's pair scores (§4.2: one card: the worst connected of the
fitting cards; several: the best connected combination), and the namespace quota (§6) is checked
per card against what the pod was given so far. A card in MIG mode gives instances of its MIG
profiles placed apart (:mod:`caldera.devices.mig`: ``CustomFilterRule``, ``AddResourceUsage``,
and the same card tried again for the next instance); one it cannot place says
``CardMigTopologyInfeasible``. Not here: comma chains of GPU policies other than ``numa``
grouping.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import NamedTuple

from caldera.devices import mig
from caldera.devices.model import Card, CardRequest, Grant

__all__ = [
    "MIG_MODE",
    "NO_GIVEN",
    "CardUse",
    "FitOptions",
    "Given",
    "NodeFit",
    "Quota",
    "Walk",
    "Walked",
    "card_order",
    "card_score",
    "fit_node",
    "hami_walk",
    "kind_ok",
    "pod_usage",
    "policy_words",
    "reason_text",
    "share_refusal",
    "slot_refusal",
    "uuid_refusal",
]


MIG_MODE = "mig"


@dataclass(slots=True)
class CardUse:
    used: int = 0
    """Containers on the card (sharing slots taken)."""
    usedmem: int = 0
    usedcores: int = 0
    placements: tuple[tuple[int, int], ...] = ()
    """The (start, size) of the MIG instances on a card in MIG mode."""

    def copy(self) -> CardUse:
        return CardUse(self.used, self.usedmem, self.usedcores, self.placements)


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
    pair_scores: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict, hash=False, compare=False
    )
    """The node's link score between two cards (topology-aware policy)."""
    quota: Quota | None = None
    """What the pod's namespace may still take (None: no GPU quota there)."""
    soft_split: bool = False
    """The pod asks for a soft split of its cards (Ascend's ``huawei.com/vnpu-mode: hami-core``:
    cores in percent)."""
    node_soft_split: bool = False
    """The node's cards can be soft split."""
    holders: Mapping[str, Sequence[Hashable]] = field(
        default_factory=dict, hash=False, compare=False
    )
    """Card UUID → the vendor's notes of each other pod's container on it
    (:attr:`~caldera.devices.vendor.Vendor.holders`; empty for the vendors that read none)."""


@dataclass(frozen=True, slots=True)
class Quota:
    """§6: what a namespace may still take, summed over every card of its pods (None: no limit)."""

    memory: int | None = None
    cores: int | None = None

    def allows(self, memory: int, cores: int) -> bool:
        return (self.memory is None or memory <= self.memory) and (
            self.cores is None or cores <= self.cores
        )


@dataclass(slots=True)
class NodeFit:
    """One node's verdict: the grants per container (init containers first), or why not."""

    grants: list[list[Grant]] | None
    reason: str = ""
    counts: Counter[str] = field(default_factory=Counter)


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


@functools.lru_cache(maxsize=64)
def policy_words(policy: str) -> frozenset[str]:
    """The words of a GPU policy chain (``binpack,numa``)."""
    return frozenset(p.strip() for p in policy.split(","))


def card_order(
    cards: Sequence[Card], uses: Sequence[CardUse], request: CardRequest, opts: FitOptions
) -> list[int]:
    """§5.3: the cards' indexes in HAMi's sorted order (Fit walks it from the end). The sort is
    stable, as Go's insertion sort is on the small lists a node has: equal cards keep their
    registration order."""
    scores = [card_score(c, u, request, opts.weights) for c, u in zip(cards, uses, strict=True)]
    policy = policy_words(opts.gpu_policy)
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


def kind_ok(model: str, mode: str, request: CardRequest, opts: FitOptions, vendor: str) -> bool:
    """Step 3 of the walk: the card's model and mode suit the pod's selectors, and the request is
    this vendor's."""
    lowered = model.lower()
    if opts.use_types and not any(t.lower() in lowered for t in opts.use_types):
        return False
    if any(t.lower() in lowered for t in opts.nouse_types):
        return False
    if opts.vgpu_mode is not None and mode not in opts.vgpu_mode:
        return False
    return request.vendor == vendor


class Given(NamedTuple):
    """What the pod's earlier containers were given on the node, for the next one's walk."""

    memory: int = 0
    """MiB, over every earlier container (the namespace quota counts them)."""
    cores: int = 0
    earlier: tuple[Grant, ...] = ()
    """The grants of the earlier containers of this one's kind (init containers for an init
    container, app containers for an app container): HAMi's ``allocated`` for a vendor's
    ``customFilterRule``."""


NO_GIVEN = Given()
"""The first container's: nothing given yet."""

Walked = tuple[list[Grant] | None, Counter[str], int | None]
"""A container's walk: its grants, or None; the reason counts; the number of cards the reasons
are out of, when it is not the node's (Ascend 910C counts against the NPUs asked)."""
Walk = Callable[[Sequence[Card], list[CardUse], CardRequest, FitOptions, str, Given], Walked]
"""A vendor's walk over one node's cards for one container (HAMi's ``Fit``)."""


def _fit_container(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """§4.2: the cards for one container, or the reasons each card said no. ``given``: what
    earlier containers of the pod were given (the quota counts their memory and cores)."""
    reasons: Counter[str] = Counter()
    nums = request.nums
    taken: list[Grant] = []
    policy = policy_words(opts.gpu_policy)
    topology = "topology-aware" in policy
    mutex = "mutex" in policy
    kinds: dict[tuple[str, str], bool] = {}
    cores = min(request.coresreq, 100)
    quota = opts.quota
    prev_numa: int | None = None
    order = card_order(cards, uses, request, opts)
    j = len(order)
    while j > 0:  # HAMi's ``for i := len(devices) - 1; i >= 0; i--``, walked from the end
        j -= 1
        card, use = cards[order[j]], uses[order[j]]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if card.id in opts.cordoned:
            reasons["CardCordoned"] += 1
            continue
        kind = (card.type, card.mode)
        suits = kinds.get(kind)
        if suits is None:
            suits = kinds[kind] = kind_ok(card.type, card.mode, request, opts, vendor)
        if not suits:
            reasons["CardTypeMismatch"] += 1
            continue
        if opts.numa_bind and prev_numa is not None and card.numa != prev_numa:
            if taken:
                reasons["NumaNotFit"] += len(taken)
            taken, nums = [], request.nums
        prev_numa = card.numa
        refused = uuid_refusal(card, opts) or slot_refusal(card, use, mutex)
        if refused:
            reasons[refused] += 1
            continue
        mem = request.memory_on(card)
        if quota is not None and not quota.allows(
            given[0] + sum(g.memory for g in taken) + mem,
            given[1] + sum(g.cores for g in taken) + cores,
        ):
            reasons["ResourceQuotaNotFit"] += 1
            continue
        refused = share_refusal(card, use, mem, cores, card.devcore)
        if refused:
            reasons[refused] += 1
            continue
        grant = Grant(card.id, request.vendor, mem, cores)
        if card.mode == MIG_MODE:
            # CustomFilterRule: an instance of a profile holding the memory has a free placement
            # among the card's instances and those this container took there already
            held = [*use.placements, *(g.mig[1:] for g in taken if g.uuid == card.id and g.mig)]
            chosen = mig.select(card.mig_profiles, held, mem)
            if chosen is None:
                reasons["CardMigTopologyInfeasible"] += 1
                continue
            profile, (start, size) = chosen
            # AddResourceUsage: the instance is charged its profile's memory and compute
            mig_instance = (profile.name, start, size)
            grant = Grant(card.id, request.vendor, profile.memory, profile.core, mig_instance)
        taken.append(grant)
        if not topology:
            nums -= 1
            if nums == 0:
                return taken, reasons, None
        if card.mode == MIG_MODE:
            j += 1  # ``i++``: the same card is tried again for the next instance
    if topology and len(taken) >= request.nums:
        return _by_topology(taken, request.nums, opts.pair_scores), reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] += len(taken)
    return None, reasons, None


hami_walk: Walk = _fit_container
"""HAMi's NVIDIA ``Fit``, the walk of every vendor that gives none of its own."""


def uuid_refusal(card: Card, opts: FitOptions) -> str | None:
    """``CheckUUID``: the pod's use/no-use UUID selectors."""
    if (opts.use_uuids and card.id not in opts.use_uuids) or card.id in opts.nouse_uuids:
        return "CardUuidMismatch"
    return None


def slot_refusal(card: Card, use: CardUse, mutex: bool) -> str | None:
    """The card has no free sharing slot, or the mutex policy wants it unused."""
    if card.count <= use.used:
        return "CardTimeSlicingExhausted"
    if mutex and use.used > 0:
        return "ExclusiveDeviceAllocateConflict"
    return None


def share_refusal(card: Card, use: CardUse, mem: int, cores: int, compute: int) -> str | None:
    """HAMi's checks of one share against a card's free memory and compute (``compute``: the
    card's total, 100 for a soft split): every vendor's ``Fit`` makes them in this order."""
    if card.devmem - use.usedmem < mem:
        return "CardInsufficientMemory"
    if compute - use.usedcores < cores:
        return "CardInsufficientCore"
    if compute == 100 and cores == 100 and use.used > 0:  # a whole card is exclusive
        return "ExclusiveDeviceAllocateConflict"
    if compute != 0 and use.usedcores == compute and cores == 0:
        return "CardComputeUnitsExhausted"
    return None


def _by_topology(
    fitting: list[Grant], nums: int, scores: Mapping[str, Mapping[str, int]]
) -> list[Grant]:
    """One card: the worst connected of the fitting cards (the well connected stay free for
    multi-card pods); several: the combination with the highest summed pair score. Ties keep
    the walk order (the first found wins)."""

    def link(a: Grant, b: Grant) -> int:
        return scores.get(a.uuid, {}).get(b.uuid, 0)

    if nums == 1:
        best = min(
            range(len(fitting)),
            key=lambda i: sum(link(fitting[i], o) for j, o in enumerate(fitting) if j != i),
        )
        return [fitting[best]]
    best_combo: tuple[Grant, ...] = tuple(fitting[:nums])
    best_score = -1
    for combo in combinations(fitting, nums):
        total = sum(link(a, b) for a, b in combinations(combo, 2))
        if total > best_score:
            best_combo, best_score = combo, total
    return list(best_combo)


def _take(cards: Sequence[Card], uses: list[CardUse], grants: Sequence[Grant]) -> None:
    at = {c.id: i for i, c in enumerate(cards)}
    for g in grants:
        use = uses[at[g.uuid]]
        use.used += g.slots_taken
        use.usedmem += g.memory
        use.usedcores += g.cores
        if g.mig is not None:
            use.placements = (*use.placements, g.mig[1:])


def reason_text(reasons: Counter[str], total: int) -> str:
    """HAMi's GenReason: ``"<n>/<cards> <Reason>"``, sorted, joined with ``", "``."""
    return ", ".join(sorted(f"{n}/{total} {reason}" for reason, n in reasons.items()))


def fit_node(
    cards: Sequence[Card],
    uses: Sequence[CardUse],
    requests: Sequence[tuple[bool, CardRequest | None]],
    opts: FitOptions,
    vendor: str = "NVIDIA",
    walk: Walk | None = None,
) -> NodeFit:
    """§4.1 for one node and one vendor (the cards whose model names it): ``requests`` is (is an
    init container, its request) per container, init containers first. ``uses`` is not changed."""
    word = vendor.lower()
    ours = [i for i, c in enumerate(cards) if word in c.type.lower()]
    own = [cards[i] for i in ours]
    # the walk only reads usage: each init container sees the node as it is, and app containers
    # see each other through a copy made only when a later app container needs it
    as_is = [uses[i] for i in ours]
    shared = as_is
    last_app = max((n for n, (init, r) in enumerate(requests) if r and not init), default=-1)
    grants: list[list[Grant]] = []
    memory = cores = 0
    earlier: dict[bool, tuple[Grant, ...]] = {True: (), False: ()}
    for n, (init, request) in enumerate(requests):
        if request is None:
            grants.append([])
            continue
        if request.nums > len(own) and not _mig_request(own, opts, vendor):
            counts = Counter({"NodeInsufficientDevice": 1})
            return NodeFit(None, reason_text(counts, len(own)), counts)
        pool = as_is if init else shared
        given = Given(memory, cores, earlier[init])
        chosen, reasons, out_of = (walk or _fit_container)(own, pool, request, opts, vendor, given)
        if chosen is None:
            total = len(own) if out_of is None else out_of
            return NodeFit(None, reason_text(reasons, total), reasons)
        memory += sum(g.memory for g in chosen)
        cores += sum(g.cores for g in chosen)
        earlier[init] = (*earlier[init], *chosen)
        if not init and n < last_app:
            if shared is as_is:
                shared = [u.copy() for u in as_is]
            _take(own, shared, chosen)
        grants.append(chosen)
    return NodeFit(grants)


def _mig_request(cards: Sequence[Card], opts: FitOptions, vendor: str) -> bool:
    """``isMIGRequest``: an NVIDIA request the pod lets go to MIG, on a node with a card in MIG
    mode (one card may then hold several of its instances)."""
    if vendor != "NVIDIA" or (opts.vgpu_mode is not None and MIG_MODE not in opts.vgpu_mode):
        return False
    return any(c.mode == MIG_MODE for c in cards)


def pod_usage(inits: int, containers: Sequence[Sequence[Grant]]) -> dict[str, CardUse]:
    """§3.5 for one pod: per card, app containers summed (one slot each), init containers as
    their peak (one slot), the larger of the two counting; every MIG instance the pod holds
    (HAMi keeps each one reserved, ``MigAllocationsInUse``)."""
    app: dict[str, CardUse] = {}
    peak: dict[str, CardUse] = {}
    instances: dict[str, tuple[tuple[int, int], ...]] = {}
    for n, grants in enumerate(containers):
        for g in grants:
            if g.mig is not None:
                instances[g.uuid] = (*instances.get(g.uuid, ()), g.mig[1:])
            if n < inits:
                p = peak.setdefault(g.uuid, CardUse())
                p.used = max(p.used, g.slots_taken)
                p.usedmem, p.usedcores = max(p.usedmem, g.memory), max(p.usedcores, g.cores)
            else:
                a = app.setdefault(g.uuid, CardUse())
                a.used += g.slots_taken
                a.usedmem += g.memory
                a.usedcores += g.cores
    out: dict[str, CardUse] = {}
    for uuid in app.keys() | peak.keys():
        a, p = app.get(uuid, CardUse()), peak.get(uuid, CardUse())
        out[uuid] = CardUse(
            max(a.used, p.used),
            max(a.usedmem, p.usedmem),
            max(a.usedcores, p.usedcores),
            instances.get(uuid, ()),
        )
    return out
