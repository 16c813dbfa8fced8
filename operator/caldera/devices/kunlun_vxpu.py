"""Kunlunxin vXPUs, the HAMi way (HAMi's ``pkg/device/kunlun/vdevice.go``): an XPU cut into
memory partitions of one size, chosen with the whole XPUs' topology (:mod:`caldera.devices.kunlun`).

What differs from the whole XPU:

- the cards (``GetNodeDevices``): HAMi's JSON on ``hami.io/node-register-xpu``, written by
  Kunlunxin's vXPU device plugin; an empty list is "no device found on node". The types are kept
  as registered: HAMi tags each card ``DeviceVendor = XPU`` but offers a request only the cards
  whose type contains ``XPU`` (``getNodeResources``), so a card registered as ``P800`` is never
  given, here as there (``NodeInsufficientDevice``);
- the request (``GenerateResourceRequests``): ``kunlunxin.com/vxpu`` (a whole number) and
  ``kunlunxin.com/vxpu-memory`` in MiB, rounded up to a partition (``trimMemory``: 24576, 49152,
  else the whole 98304); cores are ``memory * 100 / 98304``; no memory named is the whole XPU
  (98304 MiB, 100 %, 100 % of its memory);
- the fit (``FitVXPU``): healthy, the memory free, and on an XPU already used only partitions of
  the same size (its used memory over its users equals the request); under the ``mutex`` policy
  only unused XPUs, a refusal then counting ``ExclusiveDeviceAllocateConflict`` per used XPU that
  would otherwise fit. The XPUs are then chosen as whole XPUs are (``graghSelect``);
- the bind (``PatchAnnotations``): ``hami.io/xpu-devices-to-allocate`` and ``-allocated``; the
  node lock ``hami.io/mutex.lock``; no node score (``ScoreNode`` is 0).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence

from caldera.devices.fit import NO_GIVEN, CardUse, FitOptions, Given, Walked, policy_words
from caldera.devices.hami import DEFAULTS, decode_allocation, encode_allocation, from_json, named
from caldera.devices.kunlun import MEMORY, pod_options, select_walk
from caldera.devices.model import Card, CardRequest, DeviceDefaults, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, Vendor

__all__ = [
    "KUNLUN_VXPU",
    "REGISTER_ANNOTATION",
    "container_request",
    "fit_vxpu",
    "registered_cards",
    "trim_memory",
]

VENDOR = "XPU"
"""``XPUDevice`` and ``XPUCommonWord``."""
COUNT, MEMORY_RESOURCE = "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"
"""The chart's ``kunlunResourceVCountName`` and ``kunlunResourceVMemoryName``."""
REGISTER_ANNOTATION = "hami.io/node-register-xpu"
PARTITIONS = (24576, 49152)
"""``trimMemory``'s sizes below a whole XPU."""


def registered_cards(text: str) -> list[Card]:
    """``GetNodeDevices``: the JSON list (``UnMarshalNodeDevices``)."""
    cards = from_json(text.strip())
    if not cards:
        raise RegistrationError("no device found on node")
    return cards


def trim_memory(memory: int) -> int:
    """``trimMemory``: the smallest partition holding ``memory``."""
    return next((size for size in PARTITIONS if memory <= size), MEMORY)


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests`` (a count of 0 or a fraction: none)."""
    del defaults
    nums = named(COUNT, limits, requests)
    if nums is None or nums != int(nums) or int(nums) <= 0:
        return None
    memory = named(MEMORY_RESOURCE, limits, requests)
    memreq = trim_memory(int(memory)) if memory is not None and memory == int(memory) else 0
    if memreq == 0:
        return CardRequest(VENDOR, int(nums), MEMORY, 100, 100)
    return CardRequest(VENDOR, int(nums), memreq, 0, memreq * 100 // MEMORY)


def fit_vxpu(card: Card, use: CardUse, memreq: int) -> bool:
    """``FitVXPU``: healthy, room for the memory, and an used XPU only for the same size."""
    if not card.health or memreq + use.usedmem > card.devmem:
        return False
    return use.used == 0 or use.usedmem // use.used == memreq


def _walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``KunlunVDevices.Fit``: :func:`fit_vxpu` (under ``mutex``, unused XPUs only) through
    the whole XPUs' topology choice."""
    mutex = "mutex" in policy_words(opts.gpu_policy)

    def fits(card: Card, use: CardUse) -> bool:
        return (not mutex or use.used == 0) and fit_vxpu(card, use, request.memreq)

    walk = select_walk(fits, lambda _, r: (r.memreq, r.coresreq))
    grants, reasons, out_of = walk(cards, uses, request, opts, vendor, given)
    if grants is None and mutex:
        conflicts = sum(
            1
            for c, u in zip(cards, uses, strict=True)
            if u.used > 0 and fit_vxpu(c, u, request.memreq)
        )
        if conflicts:
            reasons = Counter({"ExclusiveDeviceAllocateConflict": conflicts})
    return grants, reasons, out_of


KUNLUN_VXPU = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=frozenset({COUNT, MEMORY_RESOURCE}),
    quota_memory=MEMORY_RESOURCE,
    quota_cores="",
    keys=dataclasses.replace(
        HAMI_KEYS,
        to_allocate="hami.io/xpu-devices-to-allocate",
        allocated="hami.io/xpu-devices-allocated",
    ),
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=_walk,
    screened=False,
    family="kunlun",
)
"""HAMi's Kunlunxin vXPUs."""
