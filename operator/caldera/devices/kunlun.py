"""Kunlunxin XPUs taken whole, the HAMi way (HAMi's ``pkg/device/kunlun``: ``device.go``,
``topo.go``), and the topology choice its vXPU dialect shares (:mod:`caldera.devices.kunlun_vxpu`).

A Kunlunxin node has eight XPUs in two groups of four (the "wings": positions 0-3 and 4-7),
linked inside a group and pairwise across (0-4, 1-5, 2-6, 3-7). HAMi picks XPUs so that a pod's
cards stay in one wing, or on a linked pair or quad across, and so that wings are left whole
for later pods. What this module follows:

- the cards (``GetNodeDevices``): one per unit of the node's ``kunlunxin.com/xpu`` capacity,
  ``<node>-kunlun-<i>``, 100 slots, 98304 MiB and 100 % each, the second half on NUMA 1; a node
  whose count is not a positive whole number has none ("device not found");
- the request (``GenerateResourceRequests``): ``kunlunxin.com/xpu`` (a whole number) asks for
  that many whole XPUs (the whole memory, 0 cores);
- the fit (``Fit``, :func:`graph_select`): an XPU fits when nobody uses it and it is healthy
  (``FitXPU``) and the pod's UUID selectors allow it (``hami.io/use-xpu-uuid``,
  ``baidu.com/use-gpuuuid`` and their ``no-use`` twins). ``graghSelect`` then counts the fitting
  XPUs per wing *by position in HAMi's card order* (the list ``fitInDevices`` sorted) and takes,
  for 1, 2 or 4 XPUs, the wing whose count is the tightest fit (odd counts try 1, 3, 2, 4 free
  XPUs, even ones count..4), else a linked pair or quad across the wings (``interconnect``); 8
  takes all or nothing; other counts nothing. A refusal is ``CardUuidMismatch`` (the selectors
  refused some XPU) or ``NumaNotFit``, once for the node;
- the node score (``ScoreNode``, :func:`bubble_score`): how the pod changes the node's wings'
  fragmentation, 3000 (fewer "bubbles"), 2000, 1000 or 0, added unweighted under every policy
  (HAMi #2973 notes that spread then prefers the worse node; the issue is closed, but Kunlunxin
  is not among HAMi's ``PolicyNeutralScorer`` backends at 4707fb0, so kept, as HAMi does);
- the bind (``PatchAnnotations``): ``hami.io/kunlun-allocated`` only, and ``BAIDU_COM_DEVICE_IDX``,
  the indexes of the last container holding XPUs; no node lock.

A grant records the card's whole memory and compute, as HAMi writes them in the allocation (and
as HAMi counts them once a pod holds the XPUs). HAMi's ``AddResourceUsage`` counts only the slot
while it fits one pod's containers, so a later container of the same pod sees the earlier one's
XPUs used but none of their memory; Caldera's walk sees the memory too (a pod with two containers
of whole XPUs may then sort its second container's XPUs differently).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    uuid_refusal,
)
from caldera.devices.hami import (
    DEFAULTS,
    GPU_POLICY,
    card_index,
    comma_list,
    decode_allocation,
    encode_allocation,
    named,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import (
    HAMI_KEYS,
    NO_LABELS,
    BindPod,
    ScoreInput,
    Vendor,
    no_annotation_cards,
)

__all__ = [
    "DEVICE_SELECTION",
    "KUNLUN_XPU",
    "bubble_score",
    "capacity_cards",
    "container_request",
    "count_bubbles",
    "device_pick",
    "graph_select",
    "interconnect",
    "pod_options",
]

VENDOR = "kunlun"
"""``KunlunGPUDevice`` and ``KunlunGPUCommonWord``."""
COUNT = "kunlunxin.com/xpu"
"""The chart's ``kunlunResourceName``."""
MEMORY = 98304
"""``KunlunMaxMemory``: one XPU's MiB."""
USE_UUIDS = (
    ("hami.io/use-xpu-uuid", "hami.io/no-use-xpu-uuid"),
    ("baidu.com/use-gpuuuid", "baidu.com/nouse-gpuuuid"),
)
"""The two pairs of UUID selectors ``Fit`` checks (``UseUUIDAnno`` and ``KunlunUseUUID``)."""
DEVICE_SELECTION = "BAIDU_COM_DEVICE_IDX"
ALLOCATED = "hami.io/kunlun-allocated"
WING = 4
INTER_GROUP = ((0, 4), (1, 5), (2, 6), (3, 7))
"""``InterGroupConnection``: the links across the wings."""
GROUP = tuple(
    (a, b) for wing in (0, 4) for a in range(wing, wing + 4) for b in range(a + 1, wing + 4)
)
"""``GroupConnection``: the links inside a wing."""
QUADS = ((0, 1, 4, 5), (2, 3, 6, 7), (0, 2, 4, 6), (1, 3, 5, 7), (0, 3, 4, 7), (1, 2, 5, 6))
"""``InterGroupConnection2``: the linked quads across the wings."""
NO_CARD = ""
"""A use list no card is on (no card has an empty id)."""
ODD_ORDER = (1, 3, 2, 4)
"""``oddorder``: the free XPUs per wing an odd request tries, tightest first."""

Fits = Callable[[Card, CardUse], bool]


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one XPU per unit of ``kunlunxin.com/xpu``."""
    del annotations, labels  # Kunlunxin registers nothing for whole XPUs
    count = capacity.get(COUNT)
    if count is None or count != int(count) or int(count) <= 0:
        raise RegistrationError(f"device not found {COUNT}")
    cards = int(count)
    return [
        Card(
            id=f"{node}-kunlun-{i}",
            count=100,
            devmem=MEMORY,
            devcore=100,
            type=VENDOR,
            health=True,
            index=i,
            numa=1 if i >= cards // 2 else 0,
        )
        for i in range(cards)
    ]


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: that many whole XPUs (0 or a fraction: none)."""
    del defaults
    nums = named(COUNT, limits, requests)
    if nums is None or nums != int(nums) or int(nums) <= 0:
        return None
    return CardRequest(VENDOR, int(nums), 0, 100, 0)


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """The GPU policy and the UUID selectors. ``Fit`` checks two pairs in turn
    (``hami.io/use-xpu-uuid``... and ``baidu.com/use-gpuuuid``...), a card passing each: the
    same as one pair whose use list is what both lists allow and whose no-use list is either's
    (an empty use list is no constraint, so two lists with nothing in common allow no card)."""
    del cordon
    uses = [frozenset(comma_list(annotations.get(use))) for use, _ in USE_UUIDS]
    named_lists = [u for u in uses if u]
    allowed = frozenset.intersection(*named_lists) if named_lists else frozenset()
    if named_lists and not allowed:
        allowed = frozenset({NO_CARD})
    nouse = frozenset().union(*(comma_list(annotations.get(n)) for _, n in USE_UUIDS))
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        use_uuids=allowed,
        nouse_uuids=nouse,
    )


# -- topo.go -------------------------------------------------------------------------------------


def _wing_of(position: int) -> int:
    return 0 if position < WING else 1


def device_pick(
    order: Sequence[Card], fitting: Sequence[bool], start: int, count: int
) -> list[int]:
    """``devicepick``: the indexes of the first ``count`` fitting XPUs from ``start`` on."""
    out: list[int] = []
    for t in range(start, min(2 * WING, len(order))):
        if fitting[t]:
            out.append(order[t].index)
            if len(out) == count:
                break
    return out


def interconnect(order: Sequence[Card], fitting: Sequence[bool], count: int) -> list[int]:
    """``interconnect``: a linked pair across the wings, or a linked quad."""
    free = [c.index for c, ok in zip(order, fitting, strict=True) if ok]
    if count == 2:
        for a in free:
            for b in free:
                if a != b and ((a, b) in INTER_GROUP or (b, a) in INTER_GROUP):
                    return [a, b]
    if count == 4:
        have = set(free)
        if len(free) in (4, 5):
            for quad in QUADS:
                if have.issuperset(quad):
                    return list(quad)
        if len(free) == 6:
            chosen: list[int] = []
            for quad in QUADS:
                if have.issuperset(quad):
                    chosen = list(quad)
                    rest = have - set(quad)
                    if any(rest.issuperset(link) for link in (*INTER_GROUP, *GROUP)):
                        return chosen
            return chosen
    return []


def graph_select(order: Sequence[Card], fitting: Sequence[bool], count: int) -> list[int]:
    """``graghSelect``: the indexes of the XPUs to take (empty: none), ``order`` being HAMi's
    sorted card list and ``fitting`` whether each fits."""
    wings = Counter(_wing_of(t) for t, ok in enumerate(fitting) if ok)
    left, right = wings[0], wings[1]
    if count == 2 * WING:
        return [0, 1, 2, 3, 4, 5, 6, 7] if left + right == count else []
    if count not in (1, 2, 4):
        return []
    if left >= count or right >= count:
        for slots in range(count, WING + 1):
            num = ODD_ORDER[slots - 1] if count % 2 == 1 else slots
            if left == num:
                return device_pick(order, fitting, 0, count)
            if right == num:
                return device_pick(order, fitting, WING, count)
    return interconnect(order, fitting, count)


def select_walk(
    fits: Fits, memory: Callable[[Card, CardRequest], tuple[int, int]]
) -> Callable[[Sequence[Card], list[CardUse], CardRequest, FitOptions, str, Given], Walked]:
    """A Kunlunxin ``Fit``: the cards in HAMi's order, each fitting by ``fits`` and the pod's
    UUID selectors, chosen by :func:`graph_select`; a grant is ``memory(card, request)``."""

    def walk(
        cards: Sequence[Card],
        uses: list[CardUse],
        request: CardRequest,
        opts: FitOptions,
        vendor: str,
        given: Given = NO_GIVEN,
    ) -> Walked:
        del given  # no quota, no customFilterRule
        reasons: Counter[str] = Counter()
        if request.vendor != vendor:
            reasons["CardTypeMismatch"] = len(cards)
            return None, reasons, None
        order = [cards[i] for i in card_order(cards, uses, request, opts)]
        use_of = {c.id: u for c, u in zip(cards, uses, strict=True)}
        refused = [uuid_refusal(c, opts) is not None for c in order]
        fitting = [not bad and fits(c, use_of[c.id]) for c, bad in zip(order, refused, strict=True)]
        chosen = graph_select(order, fitting, request.nums)
        if not chosen:
            if any(refused):
                reasons["CardUuidMismatch"] = sum(refused)
            else:
                reasons["NumaNotFit"] = 1
            return None, reasons, None
        by_index = {c.index: c for c in cards}
        grants = []
        for index in chosen:
            card = by_index[index]
            mem, cores = memory(card, request)
            grants.append(Grant(card.id, request.vendor, mem, cores))
        return grants, reasons, None

    return walk


def _fit_xpu(card: Card, use: CardUse) -> bool:
    """``FitXPU``: unused and healthy."""
    return use.used == 0 and card.health


def count_bubbles(indexes: set[int]) -> int:
    """``countbubble``/``getvalue``: per wing, 0 when all four XPUs are in ``indexes``, 2 when
    one is, else 1; 1 for no XPU at all."""
    left = sum(1 for i in indexes if i < WING)
    right = len(indexes) - left
    if not left and not right:
        return 1
    return sum(0 if n == WING else 2 if n == 1 else 1 for n in (left, right))


def bubble_score(before: Sequence[tuple[Card, CardUse]], taken: Sequence[Card]) -> float:
    """``ScoreNode``/``calcscore``: 3000 when the pod's XPUs make the wings less fragmented than
    the XPUs in use before, 2000 as fragmented, 1000 or 0 when more."""

    previous = {c.index for c, u in before if u.used > 0}
    change = count_bubbles({c.index for c in taken}) - count_bubbles(previous)
    return {-1: 3000.0, 0: 2000.0, 1: 1000.0, 2: 0.0}.get(change, 1000.0)


def _score_node(seen: ScoreInput) -> float:
    if any(VENDOR not in c.type for c in seen.cards):
        return 0.0
    by_id = {c.id: c for c in seen.cards}
    taken = [by_id[g.uuid] for grants in seen.grants for g in grants if g.uuid in by_id]
    return bubble_score(list(zip(seen.cards, seen.before, strict=True)), taken)


def _selection(pod: BindPod, containers: Sequence[Sequence[Grant]], now: float) -> dict[str, str]:
    """``PatchAnnotations``: the XPU indexes of the last container holding some."""
    del pod, now
    out: dict[str, str] = {}
    for grants in containers:
        if grants:
            out[DEVICE_SELECTION] = ",".join(str(card_index(g.uuid)) for g in grants)
    return out


KUNLUN_XPU = Vendor(
    name=VENDOR,
    register_annotation="",
    resources=frozenset({COUNT}),
    quota_memory="",
    quota_cores="",
    keys=dataclasses.replace(HAMI_KEYS, to_allocate=ALLOCATED, allocated=ALLOCATED, lock=""),
    count_resource=COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=select_walk(_fit_xpu, lambda card, _: (card.devmem, card.devcore)),
    screened=False,
    score_node=_score_node,
    more_annotations=_selection,
    more_keys=(DEVICE_SELECTION,),
    from_capacity=capacity_cards,
    capacity_names=(COUNT,),
    family="kunlun",
)
"""HAMi's whole Kunlunxin XPUs."""
