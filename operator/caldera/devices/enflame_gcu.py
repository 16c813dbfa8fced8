"""Enflame GCUs taken whole, the HAMi way (HAMi's ``pkg/device/enflame/gcu.go``).

Enflame's plain device plugin publishes a node's GCUs only as the capacity
``enflame.com/gcu``, and a pod asks for whole GCUs by that name; HAMi lists the GCUs from the
number and never shares one. What it follows:

- the cards (``GetNodeDevices``): ``<node>-GCU-<i>`` for each GCU of the capacity, one slot,
  100 of memory and 100 % compute each; a capacity that is 0 or not a whole number is "device
  not found";
- the request (``GenerateResourceRequests``): ``enflame.com/gcu`` (limits first, then
  requests), a whole number of GCUs (0 or less asks for nothing), each taken with 100 of
  memory and 100 % cores;
- the fit (``Fit``): the GCUs walked from the last in HAMi's card order: health, the request's
  type, then a GCU anything holds is refused (``ExclusiveDeviceAllocateConflict``); no UUID
  selectors, no slots or memory checks, no NUMA, no cordon, no quota;
- the bind (``PatchAnnotations``): the allocation on ``hami.io/enflame-gcu-devices-to-allocate``
  and ``hami.io/enflame-gcu-devices-allocated``; no node lock, and the card score is 0.

It belongs to the ``enflame`` section of HAMi's device ConfigMap, as the DRS dialect
(:mod:`caldera.devices.enflame`) does: naming ``enflame`` in ``deviceshare.Vendors`` shares both.
Only this walk judges a node (``screened=False``), so a node whose GCUs are taken says HAMi's
``ExclusiveDeviceAllocateConflict``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence

from caldera.devices.enflame import FAMILY
from caldera.devices.enflame_drs import int32
from caldera.devices.fit import NO_GIVEN, CardUse, FitOptions, Given, Walked, card_order
from caldera.devices.hami import (
    DEFAULTS,
    GPU_POLICY,
    SCORING_WEIGHTS,
    as_int64,
    decode_allocation,
    encode_allocation,
    named,
    scoring_weights,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, Vendor, no_annotation_cards

__all__ = [
    "COUNT",
    "ENFLAME_GCU",
    "KEYS",
    "VENDOR",
    "capacity_cards",
    "container_request",
    "gcu_walk",
    "pod_options",
]

VENDOR = "GCU"
"""``EnflameGCUDevice`` and ``EnflameGCUCommonWord``."""
COUNT = "enflame.com/gcu"
"""The chart's ``resourceNameGCU``."""
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/enflame-gcu-devices-to-allocate",
    allocated="hami.io/enflame-gcu-devices-allocated",
    lock="",
)
WHOLE = 100
"""A GCU's ``Devmem`` and ``Devcore``, and what each GCU asked takes of them."""


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one GCU per unit of the ``enflame.com/gcu`` capacity."""
    del labels  # no node label decides these cards
    del annotations  # the plain device plugin registers nothing on the node
    count = as_int64(capacity.get(COUNT, 0.0))
    if not count:
        raise RegistrationError(f"device not found {COUNT}")
    return [
        Card(f"{node}-{VENDOR}-{i}", 1, WHOLE, WHOLE, VENDOR, True, index=i) for i in range(count)
    ]


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: the GCUs a container asks, each whole; None when it names
    none, or a number that is not whole or not positive (``Resourcereqs`` keeps ``Nums > 0``).
    ``defaults`` play no part."""
    del defaults
    value = named(COUNT, limits, requests)
    count = None if value is None else as_int64(value)
    if count is None or int32(count) <= 0:
        return None
    return CardRequest(VENDOR, int32(count), WHOLE, WHOLE, WHOLE)


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """HAMi's generic GPU policy and scoring weights (they order the GCUs); nothing else."""
    del cordon  # the GCU Fit has no cordon
    weights = annotations.get(SCORING_WEIGHTS)
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


def gcu_walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``GCUDevices.Fit`` for one container: free GCUs from the end of HAMi's card order until
    it has its number, or why each GCU said no."""
    del vendor, given  # one vendor word; no quota
    reasons: Counter[str] = Counter()
    nums = request.nums
    taken: list[Grant] = []
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if request.vendor != VENDOR:  # checkType
            reasons["CardTypeMismatch"] += 1
            continue
        if use.used > 0:
            reasons["ExclusiveDeviceAllocateConflict"] += 1
            continue
        if nums > 0:
            nums -= 1
            taken.append(Grant(card.id, VENDOR, request.memreq, request.coresreq))
        if nums == 0:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


ENFLAME_GCU = Vendor(
    name=VENDOR,
    register_annotation="",
    resources=frozenset({COUNT}),
    quota_memory="",
    quota_cores="",
    keys=KEYS,
    count_resource=COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=gcu_walk,
    screened=False,
    from_capacity=capacity_cards,
    capacity_names=(COUNT,),
    family=FAMILY,
)
"""HAMi's Enflame dialect for whole GCUs (no memory or core resource: no namespace quota)."""
