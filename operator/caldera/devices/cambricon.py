"""Cambricon MLUs the HAMi way (HAMi's ``pkg/device/cambricon``), shared as dynamic sMLUs.

Cambricon's device plugin in sMLU mode publishes each node's MLUs only as capacity: the
node's ``cambricon.com/mlu.smlu.vcore`` is 100 per MLU and ``cambricon.com/mlu.smlu.vmemory``
the node's memory in units of 256 MiB. HAMi lists the cards from those two numbers, so this
module does too, and reuses HAMi's NVIDIA walk, whose checks Cambricon's ``Fit`` makes in the
same order. What is Cambricon's own:

- the cards (``GetNodeDevices``): ``<node>-cambricon-mlu-<i>`` for each 100 vcores, 100 sharing
  slots and 100 % compute each, the node's memory split evenly; a node whose vcore capacity is
  not a positive whole number has none ("device not found");
- the request (``GenerateResourceRequests``): ``cambricon.com/mlu`` (a whole number; 0 or a
  fraction asks for nothing), ``mlu.smlu.vmemory`` in units of 256 MiB (a memory that is not a
  whole number, or over ``MaxInt32 / 256``, empties the request), ``mlu.smlu.vcore`` (no cores
  named: 100, the whole MLU). No memory named asks for 100 % of the card's memory;
- no card-type selector and no NUMA grouping (``checkType`` looks only at the request's type);
  the UUID selectors are ``cambricon.com/use-gpuuuid`` / ``nouse-gpuuuid``; no cordon;
- the namespace quota on ``limits.cambricon.com/mlu.smlu.vmemory`` counts in units of 256 MiB
  (``fitQuota``, after HAMi issue #2468: a whole-card ask is charged its card's memory);
- at bind (``PatchAnnotations``): the allocation on ``hami.io/cambricon-mlu-devices-to-allocate``
  and ``-allocated``, ``CAMBRICON_DSMLU_ASSIGNED: "false"`` and ``CAMBRICON_DSMLU_PROFILE:
  <index>_<cores>_<memory / 256>`` of the first container holding an MLU, which the device
  plugin reads to carve the sMLU;
- the node lock (``LockNode``) is ``cambricon.com/dsmlu.lock`` holding the RFC 3339 time alone,
  stale after 2 minutes whatever ``deviceshare.NodeLockTimeout`` says.

The card score is 0 (``ScoreNode``): nodes are ordered by HAMi's generic node policy alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from caldera.devices.hami import (
    DEFAULTS,
    INT32_MAX,
    card_index,
    decode_allocation,
    encode_allocation,
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
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, BindPod, Vendor, no_annotation_cards

__all__ = [
    "CAMBRICON_MLU",
    "KEYS",
    "MEMORY_FACTOR",
    "capacity_cards",
    "container_request",
    "dsmlu_annotations",
    "pod_options",
]

VENDOR = "MLU"
"""``CambriconMLUDevice`` and ``CambriconMLUCommonWord``."""
COUNT = "cambricon.com/vmlu"
MEMORY = "cambricon.com/mlu.smlu.vmemory"
CORES = "cambricon.com/mlu.smlu.vcore"
"""The chart's ``mluResourceName``, ``mluResourceMem`` and ``mluResourceCores``."""
MEMORY_FACTOR = 256
"""MiB per ``vmemory`` unit (``MemoryFactor``)."""
CORES_PER_MLU = 100
USE_UUID, NOUSE_UUID = "cambricon.com/use-gpuuuid", "cambricon.com/nouse-gpuuuid"
ASSIGNED, PROFILE = "CAMBRICON_DSMLU_ASSIGNED", "CAMBRICON_DSMLU_PROFILE"
LOCK = "cambricon.com/dsmlu.lock"
LOCK_EXPIRY = 120.0
"""``LockNode``: a lock older than two minutes is released and taken."""
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/cambricon-mlu-devices-to-allocate",
    allocated="hami.io/cambricon-mlu-devices-allocated",
    lock=LOCK,
)


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one MLU per 100 vcores of ``capacity``, each with the node's vmemory
    split evenly (``memoryTotal * 256 * 100 / cards``)."""
    del labels  # no node label decides these cards
    del annotations  # Cambricon registers nothing on the node
    vcores = capacity.get(CORES)
    if vcores is None or vcores != int(vcores) or int(vcores) == 0:
        raise RegistrationError(f"device not found {CORES}")
    cards = int(vcores)
    memory = capacity.get(MEMORY, 0.0)
    total = int(memory) if memory == int(memory) else 0  # AsInt64 fails: 0
    devmem = go_int32(total * MEMORY_FACTOR * 100 // cards)
    return [
        Card(
            id=f"{node}-cambricon-mlu-{i}",
            count=CORES_PER_MLU,
            devmem=devmem,
            devcore=CORES_PER_MLU,
            type=VENDOR,
            health=True,
            index=i,
        )
        for i in range((cards + CORES_PER_MLU - 1) // CORES_PER_MLU)
    ]


def _whole(value: float) -> bool:
    return value == int(value)


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: what a container asks of each MLU, or None. ``defaults``
    play no part: Cambricon has no configured default memory or cores, and a fixed factor."""
    del defaults
    nums = named(COUNT, limits, requests)
    if nums is None or not _whole(nums) or int(nums) <= 0:
        return None
    memreq = 0
    memory = named(MEMORY, limits, requests)
    if memory is not None:
        if not _whole(memory) or not 0 <= memory <= INT32_MAX // MEMORY_FACTOR:
            return None
        memreq = int(memory) * MEMORY_FACTOR
    coresreq = CORES_PER_MLU
    cores = named(CORES, limits, requests)
    if cores is not None and _whole(cores):
        coresreq = go_int32(int(cores))
    return CardRequest(
        vendor=VENDOR,
        nums=go_int32(int(nums)),
        memreq=memreq,
        mem_percentage=100 if memreq == 0 else 0,
        coresreq=coresreq,
    )


pod_options = uuid_options(USE_UUID, NOUSE_UUID)
"""The UUID selectors (``CheckUUID``), HAMi's generic GPU policy and scoring weights."""


def dsmlu_annotations(
    pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
) -> dict[str, str]:
    """``PatchAnnotations``' own keys: the sMLU profile of the first container holding an MLU
    (``<index>_<cores>_<memory / 256>``), and "not yet assigned" for the device plugin."""
    del pod, now
    first = next((grants[0] for grants in containers if grants), None)
    if first is None:
        return {}
    profile = f"{card_index(first.uuid)}_{first.cores}_{first.memory // MEMORY_FACTOR}"
    return {ASSIGNED: "false", PROFILE: profile}


CAMBRICON_MLU = Vendor(
    name=VENDOR,
    register_annotation="",
    resources=frozenset({COUNT, MEMORY, CORES}),
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=KEYS,
    count_resource=COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    more_annotations=dsmlu_annotations,
    more_keys=(ASSIGNED, PROFILE),
    from_capacity=capacity_cards,
    capacity_names=(CORES, MEMORY),
    family="cambricon",
    memory_factor=MEMORY_FACTOR,
    lock_expiry=LOCK_EXPIRY,
    bare_lock=True,
)
"""HAMi's Cambricon MLU dialect (sMLU)."""
