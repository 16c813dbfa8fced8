"""Hygon DCUs the HAMi way (HAMi's ``pkg/device/hygon``, v2.10.0 names: DCU, not the later HCU).

HAMi ships a second vendor whose protocol is NVIDIA's with other names, so a cluster running
Hygon's device plugin can keep it with Caldera as the scheduler. This module reuses the NVIDIA
module's readers and writers and states only what differs:

- the registration ``hami.io/node-dcu-register`` is always the legacy colon form (7 or 9 fields
  per card, never JSON); there are no pair scores (``ScoreNode`` is 0 for DCUs);
- the request is ``hygon.com/dcunum``, ``dcumem`` (MiB, times the memory factor only when it is
  above 1) and ``dcucores``; there is no memory percentage, and no configured default memory or
  cores: a container naming no cores gets **100** (the whole card's compute, so a used card is
  out of reach), one naming no memory the whole card's memory; cores outside 0-100 or a count
  or memory that is not a whole number empty the request;
- the allocation string is NVIDIA's with the vendor word ``DCU``, written to
  ``hami.io/dcu-devices-to-allocate`` and ``hami.io/dcu-devices-allocated``; the other bind
  annotations and the node lock are HAMi's shared ones;
- the pod's say: ``hygon.com/use-dcutype``/``nouse-dcutype`` and ``hygon.com/use-gpuuuid``/
  ``nouse-gpuuuid``; no NUMA binding, no vGPU mode. The GPU policy and the scoring weights are
  HAMi's generic pod annotations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from caldera.devices.fit import FitOptions
from caldera.devices.hami import (
    CORDON_ANNOTATION,
    DEFAULTS,
    GPU_POLICY,
    INT32_MAX,
    SCORING_WEIGHTS,
    comma_list,
    decode_allocation,
    encode_allocation,
    from_colons,
    named,
    scoring_weights,
)
from caldera.devices.model import UNSET_PERCENTAGE, Card, CardRequest, DeviceDefaults
from caldera.devices.vendor import HAMI_KEYS, Vendor

__all__ = [
    "HYGON_DCU",
    "KEYS",
    "REGISTER_ANNOTATION",
    "RESOURCES",
    "VENDOR",
    "container_request",
    "pod_options",
    "registered_cards",
]

VENDOR = "DCU"
REGISTER_ANNOTATION = "hami.io/node-dcu-register"
COUNT, MEMORY, CORES = "hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"
RESOURCES = frozenset({COUNT, MEMORY, CORES})
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/dcu-devices-to-allocate",
    allocated="hami.io/dcu-devices-allocated",
)
USE_TYPE, NOUSE_TYPE = "hygon.com/use-dcutype", "hygon.com/nouse-dcutype"
USE_UUID, NOUSE_UUID = "hygon.com/use-gpuuuid", "hygon.com/nouse-gpuuuid"
WHOLE_CARD_CORES = 100
"""Hygon's ``corenum := int32(100)``: no cores named means all of them."""


def registered_cards(text: str) -> list[Card]:
    """The cards a node registers: ``id,count,devmem,devcore,type,numa,health[,index,mode]:``."""
    return from_colons(text.strip())


def _whole(value: float) -> bool:
    return 0 <= value <= INT32_MAX and value == int(value)


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """What a container asks of each DCU, or None (no positive whole ``dcunum``; a memory that is
    not a whole non-negative number; cores outside 0-100). Only the memory factor is read from
    ``defaults``: Hygon has no default memory or cores."""
    nums = named(COUNT, limits, requests)
    if nums is None or nums <= 0 or not _whole(nums):
        return None
    memory = named(MEMORY, limits, requests)
    memreq = 0
    if memory is not None:
        if not _whole(memory):
            return None
        memreq = int(memory)
        if defaults.memory_factor > 1:
            memreq *= defaults.memory_factor
            if memreq > INT32_MAX:
                return None
    cores = named(CORES, limits, requests)
    coresreq = WHOLE_CARD_CORES
    if cores is not None:
        if not 0 <= cores <= 100 or cores != int(cores):
            return None
        coresreq = int(cores)
    return CardRequest(
        vendor=VENDOR,
        nums=int(nums),
        memreq=memreq,
        mem_percentage=100 if memreq == 0 else UNSET_PERCENTAGE,
        coresreq=coresreq,
    )


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """The DCU model and UUID selectors; the pod's ``hami.io/gpu-scheduler-policy`` overrides
    ``gpu_policy`` (the scheduler's default)."""
    weights = annotations.get(SCORING_WEIGHTS)
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        use_types=comma_list(annotations.get(USE_TYPE)),
        nouse_types=comma_list(annotations.get(NOUSE_TYPE)),
        use_uuids=frozenset(comma_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(comma_list(annotations.get(NOUSE_UUID))),
        cordoned=cordon,
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


HYGON_DCU = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=RESOURCES,
    quota_memory=MEMORY,
    quota_cores=CORES,
    keys=KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation=CORDON_ANNOTATION,
)
"""HAMi's Hygon DCU dialect."""
