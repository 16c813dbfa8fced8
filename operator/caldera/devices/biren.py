"""Biren GPUs the HAMi way (HAMi's ``pkg/device/biren/device.go``), handed out whole.

HAMi's Biren support shares no memory and no compute: a container asks for a number of cards
and gets that many distinct cards, each one a sharing slot of its card. This module lets a
cluster running Biren's device plugin for HAMi keep it with Caldera as the scheduler; it follows
HAMi's ``master`` of August 2026 (commit 4707fb0), rule for rule:

- the registration ``hami.io/node-biren-register`` (``GetNodeDevices``): HAMi's JSON only
  (``UnMarshalNodeDevices``, never the colon form); every card gets 100 % compute (``Devcore =
  100``, "only for calscore use"); no card at all is "no gpu found on node";
- the request (``GenerateResourceRequests``): the chart's ``birenResourceName``
  (``birentech.com/gpu``) from limits, else requests, a whole number (Go's ``AsInt64``, then
  ``int32``); it asks for no memory and no cores (``MemPercentagereq`` 100 is only scored);
  a count of 0 or less asks for nothing;
- the walk (``BirenDevices.Fit``): the cards in HAMi's sorted order from the last, each refused
  for the first of ``CardNotHealth``, ``CardTypeMismatch`` (the request's type, not the card's),
  ``CardUuidMismatch`` (``birentech.com/use-gpuuuid`` / ``nouse-gpuuuid``),
  ``CardTimeSlicingExhausted`` and, under the ``mutex`` GPU policy,
  ``ExclusiveDeviceAllocateConflict``; no memory, core, NUMA, cordon or quota check. A granted
  card is charged no memory (``Usedmem`` is never set) and the request's cores (0);
- the bind (``PatchAnnotations``): the allocation string with the vendor word ``Biren`` on
  ``hami.io/Biren-devices-to-allocate`` and ``hami.io/Biren-devices-allocated`` (``InitBirenDevice``
  spells the keys with the common word as is); the node lock is HAMi's ``hami.io/mutex.lock``
  (``LockNode``); ``ScoreNode`` adds nothing to the node's score.

The request, registration and option readers are built by factories here because HAMi's Vastai
device (:mod:`caldera.devices.vastai`) is this device with other names and a die mode.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    policy_words,
    slot_refusal,
    uuid_refusal,
)
from caldera.devices.hami import (
    DEFAULTS,
    decode_allocation,
    encode_allocation,
    from_json,
    go_int32,
    named,
    uuid_options,
)
from caldera.devices.model import (
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import HAMI_KEYS, BindKeys, RequestReader, Vendor

__all__ = [
    "BIREN",
    "COUNT",
    "KEYS",
    "NO_GPU",
    "REGISTER_ANNOTATION",
    "VENDOR",
    "WHOLE_CARD_PERCENTAGE",
    "allocation_keys",
    "card_refusal",
    "json_cards",
    "options_reader",
    "registered_cards",
    "request_reader",
    "walk",
]

VENDOR = "Biren"
"""``BirenDevice`` and ``BirenCommonWord``: the request's type and the allocation's vendor word."""
REGISTER_ANNOTATION = "hami.io/node-biren-register"
COUNT = "birentech.com/gpu"
"""The chart's ``birenResourceName`` (``resourceCountName`` of the ConfigMap's ``biren``)."""
USE_UUID, NOUSE_UUID = "birentech.com/use-gpuuuid", "birentech.com/nouse-gpuuuid"
FAMILY = "biren"
NO_GPU = "no gpu found on node"
"""``GetNodeDevices``' error for a registration listing no card."""
CALSCORE_DEVCORE = 100
"""``Devcore = 100 // only for calscore use``: every registered card's compute."""
WHOLE_CARD_PERCENTAGE = 100
"""``mempnum := 100``: the request's memory percentage (read only by the card score)."""
_INT64 = 2**63


def allocation_keys(word: str) -> BindKeys:
    """HAMi's shared bind keys with the vendor's own allocation keys, spelled as
    ``InitBirenDevice`` / ``InitVastaiDevice`` spell them (``InRequestDevices`` and
    ``SupportDevices``): ``hami.io/<commonWord>-devices-to-allocate`` and ``-allocated``."""
    return dataclasses.replace(
        HAMI_KEYS,
        to_allocate=f"hami.io/{word}-devices-to-allocate",
        allocated=f"hami.io/{word}-devices-allocated",
    )


KEYS = allocation_keys(VENDOR)


def json_cards(
    text: str, more: Callable[[Card, Mapping[str, Any]], Card] | None = None
) -> list[Card]:
    """``GetNodeDevices`` of a vendor registering HAMi's JSON: ``UnMarshalNodeDevices`` (Go's
    ``null`` is no card), each card's compute set to 100; no card is :data:`NO_GPU`."""
    cards = [] if text.strip() == "null" else from_json(text, more)
    if not cards:
        raise RegistrationError(NO_GPU)
    return [dataclasses.replace(c, devcore=CALSCORE_DEVCORE) for c in cards]


def registered_cards(text: str) -> list[Card]:
    """``BirenDevices.GetNodeDevices``: the cards on ``hami.io/node-biren-register``."""
    return json_cards(text)


def request_reader(resource: str, word: str) -> RequestReader:
    """``GenerateResourceRequests`` of a whole-card vendor counting ``resource``."""

    def container_request(
        limits: Mapping[str, float],
        requests: Mapping[str, float],
        defaults: DeviceDefaults = DEFAULTS,
    ) -> CardRequest | None:
        """What a container asks: ``resource`` from limits, else requests, read as Go's
        ``AsInt64`` reads it (a whole number), cut to ``int32``; None when it names none or
        the count is not positive (``Resourcereqs`` keeps only ``Nums > 0``). No memory and
        no cores; ``defaults`` play no part."""
        del defaults
        value = named(resource, limits, requests)
        if value is None or not math.isfinite(value) or value != int(value):
            return None
        if not -_INT64 <= value < _INT64:
            return None
        nums = go_int32(int(value))
        if nums <= 0:
            return None
        return CardRequest(
            vendor=word,
            nums=nums,
            memreq=0,
            mem_percentage=WHOLE_CARD_PERCENTAGE,
            coresreq=0,
        )

    return container_request


options_reader = uuid_options


def card_refusal(
    card: Card,
    use: CardUse,
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    mutex: bool,
) -> str | None:
    """The checks of ``BirenDevices.Fit`` (and ``VastaiDevices.Fit``) on one card, in their
    order: health, ``checkType`` (the request's type is the vendor's), ``CheckUUID``, a free
    sharing slot, and a used card under the mutex policy."""
    if not card.health:
        return "CardNotHealth"
    if request.vendor != vendor:
        return "CardTypeMismatch"
    return uuid_refusal(card, opts) or slot_refusal(card, use, mutex)


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``BirenDevices.Fit`` for one container: ``request.nums`` cards taken from the end of
    HAMi's sorted order, or why each card said no. ``given`` is unused: no quota is checked."""
    del given
    reasons: Counter[str] = Counter()
    mutex = "mutex" in policy_words(opts.gpu_policy)
    taken: list[Grant] = []
    for i in reversed(card_order(cards, uses, request, opts)):
        card = cards[i]
        refused = card_refusal(card, uses[i], request, opts, vendor, mutex)
        if refused:
            reasons[refused] += 1
            continue
        taken.append(Grant(card.id, request.vendor, 0, request.coresreq))
        if len(taken) == request.nums:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


BIREN = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=frozenset({COUNT}),
    quota_memory="",
    quota_cores="",
    keys=KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=request_reader(COUNT, VENDOR),
    read_options=options_reader(USE_UUID, NOUSE_UUID),
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=walk,
    family=FAMILY,
)
"""HAMi's Biren dialect: whole cards, no memory or compute split, no quota (no memory or core
resource for a ``limits.`` quota to name)."""
