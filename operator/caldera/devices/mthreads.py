"""Moore Threads GPUs the HAMi way (HAMi's ``pkg/device/mthreads/device.go``), shared as sGPUs.

Moore Threads' device plugin publishes each node's GPUs only as capacity: the node's
``mthreads.com/sgpu-core`` is 16 per GPU and ``mthreads.com/sgpu-memory`` the node's memory in
units of 512 MiB. HAMi lists the cards from those two numbers, so this module does too. What is
Moore Threads' own:

- the cards (``GetNodeDevices``): ``<node>-mthreads-<i>`` for each 16 cores (the last one for
  what is left), 100 sharing slots and 16 cores each, the node's memory split by cores
  (``memoryTotal * 512 * 16 / cores``); a node whose core capacity is absent, 0 or not a whole
  number has none ("device not found");
- the request (``GenerateResourceRequests``, limits first): ``mthreads.com/vgpu`` (a whole number
  in 1..MaxInt32, else nothing is asked), ``sgpu-memory`` in units of 512 MiB (not a whole number
  in 0..MaxInt32/512: the request is emptied) and ``sgpu-core``, both for the whole container:
  each card is asked its share, ``memory / count`` and ``cores / count`` (Go's integer division).
  No memory named asks for 100 % of each card's memory;
- the fit (``MthreadsDevices.Fit``): HAMi's walk from the end of the sorted cards with Moore
  Threads' checks in its order: health, type, the UUID selectors ``mthreads.ai/use-gpuuuid`` and
  ``mthreads.ai/nouse-gpuuuid``, sharing slots, mutex, memory, cores (an ask above 100 is cut to
  100, so above 16 it fails), exclusive use, compute exhausted, then ``customFilterRule``: a
  container may only go to the card every earlier container of the pod (of its kind: init or
  app) holds (``CardNotFoundCustomFilterRule``). No cordon, NUMA or namespace-quota check (HAMi
  checks the quota in its admission webhook, ``fitResourceQuota``);
- at bind (``PatchAnnotations``): the allocation string (vendor word ``Mthreads``) on
  ``hami.io/mthreads-vgpu-devices-allocated`` only (HAMi registers a ``-to-allocate`` key but
  never writes it), ``mthreads.com/gpu-index`` (the card indexes of the last container holding
  cards), ``mthreads.com/predicate-time`` (nanoseconds) and ``mthreads.com/predicate-node``. There
  is no node lock (``LockNode`` takes none), and ``CheckHealth`` always says healthy;
- ``ScoreNode`` is 0: nodes are ordered by HAMi's generic node score alone.

Not the scheduler's: HAMi's webhook (``MutateAdmission``) gives a count above 1 (or a count with
no memory) 16 cores and 96 memory units per card and refuses memory other than 2, 4, 8, 16, 32,
64 or 96 units; a pod reaching the scheduler is fitted as it asks.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    policy_words,
    share_refusal,
    slot_refusal,
    uuid_refusal,
)
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
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, BindPod, Vendor, no_annotation_cards

__all__ = [
    "KEYS",
    "MEMORY_FACTOR",
    "MTHREADS",
    "capacity_cards",
    "container_request",
    "custom_filter_rule",
    "mthreads_annotations",
    "mthreads_walk",
    "pod_options",
]

VENDOR = "Mthreads"
"""``MthreadsGPUDevice`` and ``MthreadsGPUCommonWord``: the card type and the vendor word."""
COUNT, MEMORY, CORES = "mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core"
"""The chart's ``mthreads`` ``resourceCountName``, ``resourceMemoryName``, ``resourceCoreName``."""
MEMORY_FACTOR = 512
"""MiB per ``sgpu-memory`` unit (``MemoryFactor``)."""
CORES_PER_GPU = 16
"""``coresPerMthreadsGPU``: a card's cores (its ``Devcore``)."""
SLOTS = 100
"""A card's sharing slots (its ``Count``)."""
MAX_CORES = 100
"""``Fit``: "core limit can't exceed 100"."""
USE_UUID, NOUSE_UUID = "mthreads.ai/use-gpuuuid", "mthreads.ai/nouse-gpuuuid"
GPU_INDEX = "mthreads.com/gpu-index"
PREDICATE_NODE = "mthreads.com/predicate-node"
PREDICATE_TIME = "mthreads.com/predicate-time"
ALLOCATED = "hami.io/mthreads-vgpu-devices-allocated"
"""``SupportDevices[Mthreads]``. ``InRequestDevices`` names
``hami.io/mthreads-vgpu-devices-to-allocate``, which ``PatchAnnotations`` never writes: the
seam's ``to_allocate`` is therefore the allocated key itself (one key, one value)."""
KEYS = dataclasses.replace(HAMI_KEYS, to_allocate=ALLOCATED, allocated=ALLOCATED, lock="")

_INT64 = 2**63


def _quotient(a: int, b: int) -> int:
    """Go's integer division: the quotient rounded toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _as_int64(value: float) -> int | None:
    """``Quantity.AsInt64``: the value when it is a whole number an int64 holds, else None."""
    if not math.isfinite(value) or value != int(value) or not -_INT64 <= value < _INT64:
        return None
    return int(value)


# -- registration ------------------------------------------------------------------------------


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: a card per 16 cores of ``capacity`` (``for i*16 < cores``), each
    with ``int32(memoryTotal * 512 * 16 / cores)`` MiB."""
    del labels  # no node label decides these cards
    del annotations  # Moore Threads registers nothing on the node
    raw = capacity.get(CORES)
    cores = None if raw is None else _as_int64(raw)
    if not cores:
        raise RegistrationError(f"device not found {CORES}")
    memory = _as_int64(capacity.get(MEMORY, 0.0)) or 0  # AsInt64 fails: 0
    devmem = go_int32(_quotient(memory * MEMORY_FACTOR * CORES_PER_GPU, cores))
    return [
        Card(
            id=f"{node}-mthreads-{i}",
            count=SLOTS,
            devmem=devmem,
            devcore=CORES_PER_GPU,
            type=VENDOR,
            health=True,
            index=i,
        )
        for i in range(max(0, -(-cores // CORES_PER_GPU)))
    ]


# -- requests ----------------------------------------------------------------------------------


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: what a container asks of each card, or None. ``defaults``
    play no part: Moore Threads has a fixed memory factor and no default memory or cores."""
    del defaults
    count = named(COUNT, limits, requests)
    nums = None if count is None else _as_int64(count)
    if nums is None or not 0 < nums <= INT32_MAX:
        return None
    memnum = 0
    memory = named(MEMORY, limits, requests)
    if memory is not None:
        units = _as_int64(memory)
        if units is None or not 0 <= units <= INT32_MAX // MEMORY_FACTOR:
            return None  # "rejecting to avoid silent under-allocation"
        memnum = units * MEMORY_FACTOR
    corenum = 0
    cores = named(CORES, limits, requests)
    if cores is not None and (asked := _as_int64(cores)) is not None:
        corenum = go_int32(asked)
    return CardRequest(
        vendor=VENDOR,
        nums=nums,
        memreq=_quotient(memnum, nums),
        mem_percentage=100 if memnum == 0 else 0,
        coresreq=_quotient(corenum, nums),
    )


pod_options = uuid_options(USE_UUID, NOUSE_UUID)
"""The UUID selectors (``CheckUUID``), HAMi's generic GPU policy and scoring weights."""


# -- fit ---------------------------------------------------------------------------------------


def custom_filter_rule(held: Sequence[Grant], card: Card) -> bool:
    """``customFilterRule``: "Mthreads needs all devices on a device": every card the pod's
    earlier containers of this kind hold (``held``) is ``card``."""
    return all(g.uuid == card.id for g in held)


def mthreads_walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``MthreadsDevices.Fit`` for one container: the cards sorted by HAMi's GPU policy, walked
    from the last, each card failing on its first failed check; the first ``nums`` cards that
    pass are taken. ``given.earlier``: the cards the pod's earlier containers of this kind were
    given (``allocated``), for ``customFilterRule``; the ``Fit`` checks no quota."""
    held = given.earlier
    reasons: Counter[str] = Counter()
    mutex = "mutex" in policy_words(opts.gpu_policy)
    cores = min(request.coresreq, MAX_CORES)
    nums = request.nums
    taken: list[Grant] = []
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        # ``strings.Contains(dev.Type, k.Type)``, then checkType: the request's type is Mthreads
        if request.vendor not in card.type or request.vendor != vendor:
            reasons["CardTypeMismatch"] += 1
            continue
        mem = request.memory_on(card)
        refused = (
            uuid_refusal(card, opts)
            or slot_refusal(card, use, mutex)
            or share_refusal(card, use, mem, cores, card.devcore)
        )
        if refused:
            reasons[refused] += 1
            continue
        if not custom_filter_rule(held, card):
            reasons["CardNotFoundCustomFilterRule"] += 1
            continue
        taken.append(Grant(card.id, request.vendor, mem, cores))
        nums -= 1
        if nums == 0:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


# -- bind --------------------------------------------------------------------------------------


def mthreads_annotations(
    pod: BindPod,
    containers: Sequence[Sequence[Grant]],
    now: float,
) -> dict[str, str]:
    """``PatchAnnotations``' own keys, from each container holding cards in turn (the last one
    stays): its card indexes, the time in nanoseconds, and the node chosen (HAMi copies its
    ``hami.io/vgpu-node``, written just before)."""
    node = pod.node
    out: dict[str, str] = {}
    for grants in containers:
        if grants:
            out[GPU_INDEX] = ",".join(str(card_index(g.uuid)) for g in grants)
            out[PREDICATE_TIME] = str(int(now * 1_000_000_000))
            out[PREDICATE_NODE] = node
    return out


MTHREADS = Vendor(
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
    walk=mthreads_walk,
    more_annotations=mthreads_annotations,
    more_keys=(GPU_INDEX, PREDICATE_TIME, PREDICATE_NODE),
    core_unit=f" of {CORES_PER_GPU} cores",
    from_capacity=capacity_cards,
    capacity_names=(CORES, MEMORY),
    family="mthreads",
    memory_factor=MEMORY_FACTOR,
)
"""HAMi's Moore Threads dialect (sGPU)."""
