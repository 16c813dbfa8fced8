"""AWS Neuron devices the HAMi way (HAMi's ``pkg/device/awsneuron/device.go``).

AWS's Neuron device plugin publishes a node's Inferentia and Trainium devices only as capacity,
``aws.amazon.com/neuron`` (devices) and ``aws.amazon.com/neuroncore`` (NeuronCores). HAMi lists
the devices from those two numbers and shares them a core at a time, or hands out whole devices
in contiguous runs; this module does the same, so that pods keep getting the ``AWS_NEURON_IDS``
the device plugin reads, with Caldera as the scheduler. It follows HAMi at commit 4707fb02:

- the devices (``GetNodeDevices``): ``<node>-AWSNeuron-<i>`` for each of the node's devices, with
  as many sharing slots as cores per device (``neuroncore / neuron``) and those cores as a bit
  mask (``devcore`` 3 for two cores); no memory. A count that is missing, 0 or fractional is
  "device not found". The node's ``node.kubernetes.io/instance-type`` decides how runs of
  devices are taken; it is kept as the card's ``mode`` (HAMi's ``CustomInfo.AWSNodeType``);
- the request (``GenerateResourceRequests``): ``aws.amazon.com/neuron`` (limits first, then
  requests; 1 to 2^31-1) asks for whole devices; else ``aws.amazon.com/neuroncore`` (1 to
  2(2^31-1)) asks for cores: 1 is one core, more must fill whole devices of 2 cores
  (``splitCoreRequest``). Anything else empties the request;
- the fit (``Fit``, :func:`walk`): one device: the first from the end of HAMi's order with
  enough free cores, counted as bits of the mask, the core taken chosen by ``addCoreUsage``;
  several: a contiguous run of unused devices (``graphSelect``: anywhere on ``inf`` instances,
  else aligned runs of 1, 4, 8 or 16; any other count is ``NumaNotFit``), taken whole;
- the bind (``PatchAnnotations``): the allocation in ``hami.io/aws-neuron-devices-allocated``
  (HAMi writes no ``to-allocate`` key for Neuron), and for the device plugin ``AWS_NEURON_IDS``
  (device indexes for a container whose limits name ``aws.amazon.com/neuron``, else core
  indexes, with ``NEURON_RESOURCE_TYPE``), ``NEURON_ALLOC_TIME`` (Unix nanoseconds),
  ``NEURON_ALLOCATED: "false"`` and ``aws.amazon.com/predicate-node``;
- no node lock (``LockNode`` takes none), no cordon, no quota; the node score is 0.

Differences: HAMi keeps one cores-per-device number for the whole cluster, set by the first node
it registers (``coresPerAWSNeuron``); here each node's own is used (the same on a cluster of one
instance family). A core request is split at 2 cores per device, HAMi's number on every node
with 2 or more cores per device (``coresPerDevice``).
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
    policy_words,
    slot_refusal,
    uuid_refusal,
)
from caldera.devices.hami import (
    decode_allocation,
    encode_allocation,
    go_int32,
    uuid_options,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, BindPod, Vendor, no_annotation_cards

__all__ = [
    "AWS_NEURON",
    "KEYS",
    "VENDOR",
    "NeuronGrant",
    "NeuronRequest",
    "add_core_usage",
    "capacity_cards",
    "container_request",
    "graph_select",
    "mask_cores",
    "neuron_annotations",
    "neuron_request",
    "pod_options",
    "split_core_request",
    "walk",
]

VENDOR = "AWSNeuron"
"""``AWSNeuronDevice`` and ``AWSNeuronCommonWord``."""
COUNT, CORES = "aws.amazon.com/neuron", "aws.amazon.com/neuroncore"
"""The chart's ``awsneuron`` section of the device ConfigMap."""
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
USE_UUID, NOUSE_UUID = "aws.amazon.com/use-neuron-uuid", "aws.amazon.com/nouse-neuron-uuid"
ALLOCATED = "hami.io/aws-neuron-devices-allocated"
KEYS = dataclasses.replace(HAMI_KEYS, to_allocate=ALLOCATED, allocated=ALLOCATED, lock="")
"""HAMi registers only ``SupportDevices`` for Neuron: the allocation is written once."""
ASSIGNED_INDEX = "AWS_NEURON_IDS"
PREDICATE_TIME = "NEURON_ALLOC_TIME"
RESOURCE_TYPE = "NEURON_RESOURCE_TYPE"
ALLOCATED_FLAG = "NEURON_ALLOCATED"
ASSIGNED_NODE = "aws.amazon.com/predicate-node"
MAX_DEVICES = 2**31 - 1
"""``maxAWSNeuronDeviceCount``."""
CORES_PER_DEVICE_CAP = 2
"""``maxCoresPerNeuronDevice``: a device's mask has two bits, and only two core indexes are
written."""
RUN_SIZES = (1, 4, 8, 16)
"""The runs ``graphSelect`` takes, aligned, off ``inf`` instances."""


@dataclass(frozen=True, slots=True)
class NeuronRequest(CardRequest):
    """What a container asks of each Neuron device. ``coresreq`` is what the arrays' walk
    checks (1: a core free), never more than HAMi's; the walk reads ``cores``."""

    cores: int | None = None
    """HAMi's ``Coresreq``; None: whole devices (the node's cores per device)."""
    by_device: bool = False
    """The container's limits name ``aws.amazon.com/neuron``: the device plugin gets device
    indexes, not core indexes."""

    def cores_on(self, card: Card) -> int:
        """``Coresreq`` on ``card``'s node: a whole device is all its cores."""
        return card.count if self.cores is None else self.cores


@dataclass(frozen=True, slots=True)
class NeuronGrant(Grant):
    """A grant with what ``PatchAnnotations`` reads beside it: the device's index, its node's
    cores per device, and whether the container asked for devices by ``neuron`` limits."""

    index: int = 0
    cores_per_device: int = CORES_PER_DEVICE_CAP
    by_device: bool = False


def neuron_request(
    nums: int, cores: int | None, by_device: bool = False, vendor: str = VENDOR
) -> NeuronRequest:
    """HAMi's ``ContainerDeviceRequest`` (no memory)."""
    return NeuronRequest(vendor, nums, 0, 0, 1, cores=cores, by_device=by_device)


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one device per ``neuron``, ``neuroncore / neuron`` cores each.
    ``labels`` (the node's) name the instance type (``node.kubernetes.io/instance-type``)."""
    del annotations  # Neuron registers nothing on the node
    counts = capacity.get(COUNT)
    if counts is None or counts != int(counts) or counts == 0:
        raise RegistrationError(f"device not found {COUNT}")
    cores = capacity.get(CORES, 0.0)
    total = int(cores) if cores == int(cores) else 0  # AsInt64 fails: 0
    per_device = max(total, 0) // int(counts) if counts > 0 else 0
    mask = go_int32(int(2 ** min(per_device, 64) - 1))  # Go's uint mask; its low 32 bits are kept
    instance = (labels or {}).get(INSTANCE_TYPE, "")
    return [
        Card(
            id=f"{node}-{VENDOR}-{i}",
            count=go_int32(int(per_device)),
            devmem=0,
            devcore=mask,
            type=VENDOR,
            health=True,
            index=i,
            mode=instance,
        )
        for i in range(max(int(counts), 0))
    ]


def _whole(value: float, name: str, most: int) -> int:
    """``validateResourceRequest``: a whole number in 1..``most``."""
    if value != int(value):
        raise ValueError(f"{name} must be an integer")
    if value <= 0:
        raise ValueError(f"{name} must be greater than 0")
    if value > most:
        raise ValueError(f"{name} must not exceed {most}")
    return int(value)


def split_core_request(cores: int, observed: int = 0) -> tuple[int, int]:
    """``splitCoreRequest``: (devices, cores each) for ``cores`` NeuronCores, at ``observed``
    cores per device capped to 2 (0, unknown: 2); ValueError when they fill no whole devices."""
    per_device = CORES_PER_DEVICE_CAP if observed <= 0 else min(observed, CORES_PER_DEVICE_CAP)
    if cores <= per_device:
        return 1, cores
    if cores % per_device:
        raise ValueError(f"{CORES} must be 1 or a multiple of {per_device}, got {cores}")
    nums = cores // per_device
    if nums > MAX_DEVICES:
        raise ValueError(
            f"{CORES} needs {nums} devices, which exceeds the maximum of {MAX_DEVICES}"
        )
    return nums, per_device


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults | None = None,
) -> NeuronRequest | None:
    """``GenerateResourceRequests``: whole devices, else cores (each read from the limits
    first, then the requests); None when neither is asked or the one asked is invalid."""
    del defaults
    try:
        if COUNT in limits or COUNT in requests:
            value = limits[COUNT] if COUNT in limits else requests[COUNT]
            nums = _whole(value, COUNT, MAX_DEVICES)
            return neuron_request(nums, None, by_device=COUNT in limits)
        if CORES in limits or CORES in requests:
            value = limits[CORES] if CORES in limits else requests[CORES]
            nums, cores = split_core_request(_whole(value, CORES, 2 * MAX_DEVICES))
            return neuron_request(nums, cores)
    except ValueError:
        return None
    return None


pod_options = uuid_options(USE_UUID, NOUSE_UUID)
"""The UUID selectors (``CheckUUID``), HAMi's generic GPU policy and scoring weights."""


def mask_cores(mask: int) -> int:
    """``countMaskAvailable``: the cores a mask names (its set bits; 0 for no positive mask)."""
    return mask.bit_count() if mask > 0 else 0


def add_core_usage(used: int, require: int) -> int:
    """``addCoreUsage``: the mask of the cores a share takes on a device whose used mask is
    ``used`` (HAMi's ``awsusageinfo``: the device's used cores as the scheduler rebuilds them)."""
    if used == 0 and require in (1, 2):
        return 3 if require == 2 else 1
    return 3 - used


def graph_select(instance_type: str, slots: Sequence[tuple[int, bool]], count: int) -> list[int]:
    """``graphSelect``: the positions in HAMi's device order of ``count`` contiguous devices
    that are unused and healthy (``slots``: (containers, health) per position); [] when none."""

    def run(start: int) -> list[int]:
        if len(slots) < start + count:
            return []
        if any(used > 0 or not healthy for used, healthy in slots[start : start + count]):
            return []
        return list(range(start, start + count))

    if "inf" in instance_type or "Inf" in instance_type:
        starts = range(len(slots))  # a ring: a run may start anywhere
    elif count in RUN_SIZES:
        starts = range(0, len(slots), count)
    else:
        return []
    return next((r for r in map(run, starts) if r), [])


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``AWSNeuronDevices.Fit`` for one container over the devices in HAMi's order (all card
    scores are 0 for Neuron, which has no memory: registration order, busiest first under
    ``mutex``). ``given`` plays no part: HAMi checks no quota for Neuron."""
    del given
    reasons: Counter[str] = Counter()
    order = card_order(cards, uses, request, opts)
    by_device = isinstance(request, NeuronRequest) and request.by_device

    def grant(card: Card, memory: int, cores: int) -> NeuronGrant:
        return NeuronGrant(
            card.id, request.vendor, memory, cores, None, card.index, card.count, by_device
        )

    if request.nums > 1:
        instance = cards[order[0]].mode if order else ""
        slots = [(uses[i].used, cards[i].health) for i in order]
        positions = graph_select(instance, slots, request.nums)
        if not positions:
            reasons["NumaNotFit"] += 1
            return None, reasons, None
        # HAMi takes, whole, the device whose Index is each position found in its sorted order
        # (the same device only while that order is the registration order)
        ordered = [cards[i] for i in order]
        chosen = [next((c for c in ordered if c.index == p), None) for p in positions]
        grants: list[Grant] = [grant(c, c.devmem, c.devcore) for c in chosen if c is not None]
        return grants, reasons, None
    mutex = "mutex" in policy_words(opts.gpu_policy)
    for i in reversed(order):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if request.vendor not in card.type or request.vendor != VENDOR:  # checkType
            reasons["CardTypeMismatch"] += 1
            continue
        refused = uuid_refusal(card, opts) or slot_refusal(card, use, mutex)
        if refused:
            reasons[refused] += 1
            continue
        want = request.cores_on(card) if isinstance(request, NeuronRequest) else request.coresreq
        if mask_cores(card.devcore) - mask_cores(use.usedcores) < want:
            reasons["CardInsufficientCore"] += 1
            continue
        return [grant(card, 0, add_core_usage(use.usedcores, want))], reasons, None
    return None, reasons, None


def _index_of(grant: Grant) -> tuple[str, int, int, bool]:
    """(node, index, cores per device, by device) of a grant; a plain grant is read off the
    device id ``<node>-AWSNeuron-<i>``."""
    node, _, tail = grant.uuid.rpartition(f"-{VENDOR}-")
    if isinstance(grant, NeuronGrant):
        return node, grant.index, grant.cores_per_device, grant.by_device
    return node, int(tail) if tail.isdigit() else 0, CORES_PER_DEVICE_CAP, False


def neuron_annotations(
    pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
) -> dict[str, str]:
    """``PatchAnnotations``' own keys. ``AWS_NEURON_IDS`` gathers every container's indexes in
    order (init containers first): device indexes for a container asking by ``neuron`` limits,
    else the cores of each mask bit (``cores per device * index`` and ``+ 1``)."""
    del pod
    out: dict[str, str] = {}
    ids: list[str] = []
    seconds = int(now)
    nanos = seconds * 1_000_000_000 + round((now - seconds) * 1e9)
    for grants in containers:
        node = ""
        for g in grants:
            node, index, per_device, by_device = _index_of(g)
            if by_device:
                ids.append(str(index))
                continue
            for bit in (0, 1):
                if g.cores & (1 << bit):
                    ids.append(str(per_device * index + bit))
                    out[RESOURCE_TYPE] = CORES
        if grants and ids:
            out[ASSIGNED_INDEX] = ",".join(ids)
            out[PREDICATE_TIME] = str(nanos)
            out[ALLOCATED_FLAG] = "false"
            out[ASSIGNED_NODE] = node
    return out


def _always(request: CardRequest, opts: FitOptions) -> bool:
    """The arrays check a free core only: runs and whole devices are the walk's to decide."""
    return True


AWS_NEURON = Vendor(
    name=VENDOR,
    register_annotation="",
    resources=frozenset({COUNT, CORES}),
    quota_memory="",
    quota_cores=CORES,
    keys=KEYS,
    count_resource=COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=walk,
    screened=False,
    more_annotations=neuron_annotations,
    more_keys=(ASSIGNED_INDEX, PREDICATE_TIME, ALLOCATED_FLAG, ASSIGNED_NODE, RESOURCE_TYPE),
    core_unit=" core mask",
    walk_decides=_always,
    from_capacity=capacity_cards,
    capacity_names=(COUNT, CORES),
    label_names=(INSTANCE_TYPE,),
    family="awsneuron",
)
"""HAMi's AWS Neuron dialect."""
