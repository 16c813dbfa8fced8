"""AMD GPUs the HAMi way (HAMi's ``pkg/device/amd/device.go``, the AMD vGPU of HAMi PR #2290).

HAMi shares AMD Instinct GPUs by memory and by compute units (CUs): its AMD device plugin
registers the cards on the node and hands each container ``HIP_DEVICE_MEMORY_LIMIT`` and a
``HSA_CU_MASK`` of the CUs the scheduler counted. This module lets that device plugin keep working
with Caldera as the scheduler. It follows HAMi at commit 4707fb02 rule for rule:

- the cards (``GetNodeDevices``, ``CheckHealth``): HAMi's JSON in ``hami.io/node-amd-register``
  (``devcore`` is the card's CU count, ``type`` its product name); none listed is "no gpu found
  on node". A node whose capacity ``amd.com/gpu`` is missing, 0 or not a whole number is
  unhealthy for AMD and HAMi drops its cards, so the cards are read through
  :attr:`Vendor.from_capacity`, gated on that capacity;
- the request (``GenerateResourceRequests``): **limits only**: ``amd.com/gpu`` (1 to 2^31-1),
  ``amd.com/gpumem`` (MiB, 0 to 2^31-1, no memory factor), ``amd.com/gpucores`` (a percentage,
  1-100; none named is 100). Anything out of range empties the request. There is no default
  memory or cores and no memory percentage;
- the fit (``Fit``): its own walk, from the last card of HAMi's order (:func:`walk`). No memory
  named takes the whole card's memory; the percentage becomes CUs, ``devcore * pct / 100``
  clamped to 1..devcore. There is no NUMA grouping, no cordon and no namespace quota check;
  the card types are ``amd.com/use-gputype`` / ``nouse-gputype``, the UUIDs
  ``amd.com/use-gpu-uuid`` / ``nouse-gpu-uuid``;
- the bind (``PatchAnnotations``): the allocation in ``hami.io/amd-devices-to-allocate`` and
  ``-allocated``, each card under its registered product type (not the word ``AMD``), its memory
  in MiB and its cores in CUs; the node lock is HAMi's ``hami.io/mutex.lock`` (``LockNode``);
- the node score (``ScoreNode``) is 0: nodes are ordered by HAMi's generic node score alone.

The arrays' walk (:mod:`caldera.devices.table`) checks only 1 CU per card (the least any AMD
share takes, whatever the card's CU count), so it never refuses a node HAMi takes; this walk
decides every node (``walk_decides``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    kind_ok,
    policy_words,
    slot_refusal,
    uuid_refusal,
)
from caldera.devices.hami import (
    GPU_POLICY,
    INT32_MAX,
    SCORING_WEIGHTS,
    comma_list,
    decode_allocation,
    encode_allocation,
    from_json,
    scoring_weights,
)
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, Vendor

__all__ = [
    "AMD_GPU",
    "KEYS",
    "REGISTER_ANNOTATION",
    "VENDOR",
    "AmdRequest",
    "amd_request",
    "capacity_cards",
    "container_request",
    "cu_count",
    "pod_options",
    "registered_cards",
    "walk",
]

VENDOR = "AMD"
"""``AMDDevice`` and ``AMDCommonWord``."""
REGISTER_ANNOTATION = "hami.io/node-amd-register"
COUNT, MEMORY, CORES = "amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores"
"""The chart's ``amd`` section of the device ConfigMap."""
USE_TYPE, NOUSE_TYPE = "amd.com/use-gputype", "amd.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "amd.com/use-gpu-uuid", "amd.com/nouse-gpu-uuid"
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/amd-devices-to-allocate",
    allocated="hami.io/amd-devices-allocated",
)
"""``InitAMDGPUDevice``'s annotations; the node lock is ``NodeLockAMD``, HAMi's shared one."""
WHOLE_CARD_PERCENT = 100
"""An omitted ``amd.com/gpucores``: every CU of each card."""
NO_TYPE = "\x00"
"""A card-type selector no card type contains: ``amd.com/use-gputype`` naming only blank
members (``", "``) refuses every card in ``checkAMDType``."""


@dataclass(frozen=True, slots=True)
class AmdRequest(CardRequest):
    """What a container asks of each AMD GPU. ``coresreq`` is what the arrays' walk checks: 1 CU
    (0 for a request of no cores), the least any card grants; the walk converts ``percent``."""

    percent: int = WHOLE_CARD_PERCENT
    """HAMi's ``Coresreq``: percent of each card's CUs."""


def amd_request(nums: int, memreq: int, percent: int) -> AmdRequest:
    """HAMi's ``ContainerDeviceRequest`` (``MemPercentagereq`` 0): no memory is the whole card."""
    return AmdRequest(
        vendor=VENDOR,
        nums=nums,
        memreq=memreq,
        mem_percentage=100 if memreq == 0 else UNSET_PERCENTAGE,
        coresreq=min(percent, 1),
        percent=percent,
    )


def registered_cards(text: str) -> list[Card]:
    """``GetNodeDevices``: HAMi's JSON registration; an empty list is an error."""
    stripped = text.strip()
    cards = [] if stripped == "null" else from_json(stripped)
    if not cards:
        raise RegistrationError("no gpu found on node")
    return cards


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """The node's AMD cards: none when ``CheckHealth`` finds capacity ``amd.com/gpu`` missing,
    0 or fractional (HAMi removes them); else its registration."""
    del labels  # no node label decides these cards
    del node
    count = capacity.get(COUNT)
    if count is None or count != int(count) or count == 0:
        return []
    text = annotations.get(REGISTER_ANNOTATION)
    if text is None:
        raise RegistrationError(f"annos not found {REGISTER_ANNOTATION}")
    try:
        return registered_cards(text)
    except RegistrationError as exc:
        raise RegistrationError(f"{REGISTER_ANNOTATION}: {exc}") from None


def _int32(value: float | None, low: int, high: int = INT32_MAX) -> int | None:
    """Go's ``AsInt64`` of a quantity checked to ``low..high``: None when it is not whole or
    outside."""
    if value is None or value != int(value) or not low <= value <= high:
        return None
    return int(value)


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults | None = None,
) -> AmdRequest | None:
    """``GenerateResourceRequests``: read from the limits alone (``requests`` and the
    configured defaults play no part); None when the count is absent or anything is out of
    range."""
    del requests, defaults
    count = limits.get(COUNT)
    if count is None or count != int(count):
        return None  # AsInt64 fails: no request
    nums = _int32(count, 1)
    if nums is None:
        return None
    memreq = 0
    if MEMORY in limits:
        memory = _int32(limits[MEMORY], 0)
        if memory is None:
            return None
        memreq = memory
    percent = WHOLE_CARD_PERCENT
    if CORES in limits:
        cores = _int32(limits[CORES], 1, 100)
        if cores is None:
            return None
        percent = cores
    return amd_request(nums, memreq, percent)


def _types(raw: str | None) -> tuple[str, ...]:
    """``checkAMDType``'s use list: blank members skipped; a non-blank annotation of blank
    members only matches nothing."""
    members = comma_list(raw)
    if raw is not None and raw.strip() and not members:
        return (NO_TYPE,)
    return members


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """The card type and UUID selectors, and HAMi's generic GPU policy and scoring weights; AMD
    has no cordon."""
    del cordon
    weights = annotations.get(SCORING_WEIGHTS)
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        use_types=_types(annotations.get(USE_TYPE)),
        nouse_types=comma_list(annotations.get(NOUSE_TYPE)),
        use_uuids=frozenset(comma_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(comma_list(annotations.get(NOUSE_UUID))),
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


def _percent(request: CardRequest) -> int:
    return request.percent if isinstance(request, AmdRequest) else request.coresreq


def cu_count(card: Card, percent: int, memory: int) -> int | None:
    """``Fit``'s cores: ``devcore * percent / 100`` clamped to 1..devcore; no percentage with
    the whole card's memory is every CU; None: the card has no CUs to give a percentage of."""
    if percent > 0:
        if card.devcore <= 0:
            return None
        return min(max(card.devcore * percent // 100, 1), card.devcore)
    if card.devmem > 0 and memory >= card.devmem:
        return card.devcore
    return 0


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``AMDDevices.Fit`` for one container, over the cards in HAMi's order (``fitInDevices``
    sorts them by the card score of HAMi's ``Coresreq`` and ``Memreq``), walked from the last:
    health, type, UUID, sharing slots, mutex, memory, CUs; the first cards that pass are taken.
    ``given`` plays no part: HAMi checks no namespace quota for AMD."""
    del given
    percent = _percent(request)
    scored = CardRequest(request.vendor, request.nums, request.memreq, UNSET_PERCENTAGE, percent)
    mutex = "mutex" in policy_words(opts.gpu_policy)
    reasons: Counter[str] = Counter()
    taken: list[Grant] = []
    nums = request.nums
    for i in reversed(card_order(cards, uses, scored, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if not kind_ok(card.type, card.mode, request, opts, vendor):
            reasons["CardTypeMismatch"] += 1
            continue
        refused = uuid_refusal(card, opts) or slot_refusal(card, use, mutex)
        if refused:
            reasons[refused] += 1
            continue
        memory = request.memreq
        if memory <= 0 and card.devmem > 0:
            memory = card.devmem
        if card.devmem - use.usedmem < memory:
            reasons["CardInsufficientMemory"] += 1
            continue
        cores = cu_count(card, percent, memory)
        if cores is None or card.devcore - use.usedcores < cores:
            reasons["CardInsufficientCore"] += 1
            continue
        if nums > 0:
            nums -= 1
            # the allocation names the registered product type, not the word AMD
            taken.append(Grant(card.id, card.type, memory, cores))
        if nums == 0:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


def _always(request: CardRequest, opts: FitOptions) -> bool:
    """The arrays check 1 CU, not the percentage's CUs: only the walk decides."""
    return True


AMD_GPU = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=frozenset({COUNT, MEMORY, CORES}),
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=walk,
    screened=False,
    core_unit=" CUs",
    walk_decides=_always,
    from_capacity=capacity_cards,
    capacity_names=(COUNT,),
    family="amd",
    memory_factor=1,
)
"""HAMi's AMD GPU dialect."""
