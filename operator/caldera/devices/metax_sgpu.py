"""MetaX sGPUs, the HAMi way (HAMi v2.10.0 ``pkg/device/metax/``: ``sdevice.go``, ``protocol.go``,
``qos.go``, ``config.go``).

MetaX's device plugin in sGPU mode registers each card as JSON on the node, and containers share
cards by memory and compute, under a QoS policy the card runs with and, for co-located services,
an app class (online work preempts offline work on a card). This module is that dialect; its
sibling :mod:`caldera.devices.metax` is whole MetaX GPUs, and both answer to the ConfigMap
section ``metax``. What is the sGPU's own:

- the registration ``metax-tech.com/node-gpu-devices``: a JSON list of ``MetaxSDeviceInfo``
  (``getMetaxSDevices``; an empty list is "no sdevice found on node"), each card ``Metax-SGPU``
  with its ``totalDevCount`` slots, ``totalVRam`` MiB, ``totalCompute`` and, beyond HAMi's common
  fields, its QoS policy, model and MetaLink zone (``convertMetaxSDeviceToHAMIDevice``);
- the request (``GenerateResourceRequests``), read from limits only: ``metax-tech.com/sgpu``
  (1..2^31-1), ``metax-tech.com/vcore`` (default 100), ``metax-tech.com/vmemory`` in GiB when
  written without a unit (times ``MemoryFactor`` 1024), in bytes when written with one; no memory
  asks for 100 % of the card's. Caldera's requests carry numbers, not quantity strings, so the
  unit is told from the number as Kubernetes writes it: a multiple of 1000 (``1k``, ``2G``), or
  of 1024 from 1 Mi up (``1024Mi``, ``16Gi``), carries one;
- the fit (``MetaxSDevices.Fit``): in this order, type, health (``CardUnhealthy``), app class
  (``CardAppClassMismatch``), QoS (``CardQosPolicyMismatch``, not for online pods), the
  ``metax-tech.com/use-gpuuuid``/``nouse-gpuuuid`` selectors, slots, mutex, memory and (not for
  online pods, whose grants hold no cores) cores unclamped, exclusive use and exhausted compute;
  every fitting card is collected, then an online pod gets the card with the fewest online pods
  (``prioritizeOnlineDevices``) and a whole-card request the cards sharing a MetaLink zone
  (``prioritizeExclusiveDevices``), else the first found. No quota (HAMi checks it at admission);
- the node score (``ScoreNode``, policy-neutral, times 10000, negated under spread): online
  pods avoid cards with offline work, whole cards keep MetaLink zones whole when
  ``sgpuTopologyAware`` (or the pod's ``metax-tech.com/sgpu-topology-aware``) is on
  (:func:`node_score`, with ``score.go``'s link score);
- the bind (``PatchAnnotations``): the allocation on ``hami.io/metax-sgpu-devices-to-allocate``
  and ``-allocated``, the per-container JSON on ``metax-tech.com/gpu-devices-allocated`` and the
  time in nanoseconds on ``metax-tech.com/predicate-time``; the node lock ``hami.io/mutex.lock``.

Who may share a card (app classes, QoS, HAMi's ``JitteryQosCache`` rebuilt from the pods on the
card) is :mod:`caldera.devices.metax_colocation`; MetaLink zones are
:mod:`caldera.devices.metax_links`. What HAMi's webhook (``MutateAdmission``) denies is refused
here (:func:`pod_options`), and a pod naming no QoS policy is read with the ``best-effort`` the
webhook writes. The walk and the score read the pods holding each card from the seam
(:attr:`~caldera.devices.fit.FitOptions.holders`, made by :func:`card_holders`), and the walk the
grants the pod already placed (``Given.earlier``).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

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
    GO_BOOLS,
    GPU_POLICY,
    INT32_MAX,
    SCORING_WEIGHTS,
    comma_list,
    decode_allocation,
    encode_allocation,
    scoring_weights,
)
from caldera.devices.metax_colocation import (
    APP_CLASS,
    BEST_EFFORT,
    BURST_SHARE,
    FIXED_SHARE,
    OFFLINE,
    ONLINE,
    PREDICATE_TIME,
    QOS_POLICY,
    WHOLE_CARD,
    Holder,
    app_class_fits,
    card_holders,
    device_qos,
    expected_qos,
    prioritize_online,
    qos_fits,
    score_online,
)
from caldera.devices.metax_links import (
    LinkDevice,
    link_zones,
    prioritize_exclusive,
    score_exclusive,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, BindPod, ScoreInput, Vendor

__all__ = [
    "ALLOCATED",
    "KEYS",
    "MEMORY_FACTOR",
    "METAX_SGPU",
    "REGISTER_ANNOTATION",
    "TOPOLOGY_AWARE",
    "VENDOR",
    "SgpuCard",
    "SgpuOptions",
    "container_request",
    "node_score",
    "pod_options",
    "registered_cards",
    "sgpu_annotations",
    "topology_aware_enabled",
    "walk",
]

VENDOR = "Metax-SGPU"
"""``MetaxSGPUDevice`` and ``MetaxSGPUCommonWord``."""
COUNT, CORES, MEMORY = "metax-tech.com/sgpu", "metax-tech.com/vcore", "metax-tech.com/vmemory"
"""The chart's ``metaxResourceName``, ``metaxResourceCore`` and ``metaxResourceMem``."""
MEMORY_FACTOR = 1024
"""MiB per ``vmemory`` unit written without a unit (``MemoryFactor``: GiB)."""
REGISTER_ANNOTATION = "metax-tech.com/node-gpu-devices"
ALLOCATED = "metax-tech.com/gpu-devices-allocated"
USE_UUID, NOUSE_UUID = "metax-tech.com/use-gpuuuid", "metax-tech.com/nouse-gpuuuid"
TOPOLOGY_AWARE = "metax-tech.com/sgpu-topology-aware"
CARD_UNHEALTHY = "CardUnhealthy"
QOS_MISMATCH = "CardQosPolicyMismatch"
APP_CLASS_MISMATCH = "CardAppClassMismatch"
SCORE_WEIGHT = 10000.0
"""``OverrideScore``'s weight of a policy-neutral score (negated under spread)."""
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/metax-sgpu-devices-to-allocate",
    allocated="hami.io/metax-sgpu-devices-allocated",
)
"""``InitMetaxSDevice``'s annotations; the lock is ``MetaxNodeLock``, HAMi's ``mutex.lock``."""

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SgpuCard(Card):
    """A card as MetaX registers it: HAMi's fields and its ``CustomInfo``."""

    qos_policy: str = ""
    """The QoS policy the card runs with now (``qosPolicy``)."""
    model: str = ""
    link_zone: int = 0
    """The MetaLink zone (0: none)."""


@dataclass(frozen=True, slots=True)
class SgpuOptions(FitOptions):
    """HAMi's pod options and the sGPU annotations the walk and the score read."""

    app_class: str | None = None
    """``metax-tech.com/sgpu-app-class`` (None: not named, which is not the same as "")."""
    qos: str = BEST_EFFORT
    topology_aware: bool | None = None
    """The pod's ``sgpu-topology-aware`` (None: the configured ``sgpuTopologyAware``)."""


# -- registration ----------------------------------------------------------------------------------

_TEXT = ("uuid", "bdf", "model", "qospolicy")
_INT32 = (
    "totaldevcount",
    "totalcompute",
    "totalvram",
    "availabledevcount",
    "availablecompute",
    "availablevram",
    "numa",
    "linkzone",
)


def registered_cards(text: str) -> list[Card]:
    """``getMetaxSDevices`` and ``convertMetaxSDeviceToHAMIDevice``: the cards in the node's
    JSON, in order (the index is the position); Go's decoder rules (keys matched without case,
    unknown keys ignored, ``null`` leaves a field unset, a wrong type fails the whole list)."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise RegistrationError(f"not valid JSON: {exc}") from None
    if not isinstance(items, list):
        raise RegistrationError("expected a JSON array of sdevices")
    if not items:
        raise RegistrationError("no sdevice found on node")
    return [_card(i, item) for i, item in enumerate(items)]


def _card(index: int, item: object) -> Card:
    if not isinstance(item, dict):
        raise RegistrationError(f"[{index}]: expected an object")
    fields: dict[str, Any] = {}
    for key, value in item.items():
        name = key.lower()
        if value is None:
            continue
        if name in _TEXT and not isinstance(value, str):
            raise RegistrationError(f"[{index}].{key}: expected a string, got {value!r}")
        if name in _INT32 and (
            isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31
        ):
            raise RegistrationError(f"[{index}].{key}: expected an int32, got {value!r}")
        if name == "healthy" and not isinstance(value, bool):
            raise RegistrationError(f"[{index}].{key}: expected true or false, got {value!r}")
        fields[name] = value
    return SgpuCard(
        id=fields.get("uuid", ""),
        count=fields.get("totaldevcount", 0),
        devmem=fields.get("totalvram", 0),
        devcore=fields.get("totalcompute", 0),
        type=VENDOR,
        health=fields.get("healthy", False),
        index=index,
        numa=fields.get("numa", 0),
        mode="",
        qos_policy=fields.get("qospolicy", ""),
        model=fields.get("model", ""),
        link_zone=fields.get("linkzone", 0),
    )


# -- the request -----------------------------------------------------------------------------------


def _with_unit(value: int) -> bool:
    """Whether Kubernetes writes the quantity ``value`` with a unit (its canonical form): a
    multiple of 1000 (``1k``) or, from 1 Mi up, of 1024 (``1Mi``); read as written that way."""
    size = abs(value)
    return size != 0 and (size % 1000 == 0 or (size >= _MIB and size % 1024 == 0))


def _go_div(value: int, by: int) -> int:
    """Go's integer division (toward zero)."""
    return -(-value // by) if value < 0 else value // by


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``, from limits only: None when the sGPU count is absent, not a
    whole number or outside 1..2^31-1, or cores or memory are out of range. Cores or memory that
    are not whole numbers are not read (``AsInt64`` fails): 100 cores, all the memory."""
    del requests, defaults  # MetaX reads limits alone, with its own fixed factor
    count = limits.get(COUNT)
    if count is None or count != int(count) or not 0 < count <= INT32_MAX:
        return None
    core = WHOLE_CARD
    cores = limits.get(CORES)
    if cores is not None and cores == int(cores):
        if not 0 <= cores <= INT32_MAX:
            return None
        core = int(cores)
    mem = 0
    memory = limits.get(MEMORY)
    if memory is not None and memory == int(memory):
        value = int(memory)
        if _with_unit(value):
            mem = _go_div(_go_div(value, 1024), 1024)
        else:
            if not 0 <= value <= INT32_MAX // MEMORY_FACTOR:
                return None
            mem = value * MEMORY_FACTOR
        if not 0 <= mem <= INT32_MAX:
            return None
    return CardRequest(
        vendor=VENDOR,
        nums=int(count),
        memreq=mem,
        mem_percentage=100 if mem == 0 else 0,
        coresreq=core,
    )


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """The pod's UUID selectors, GPU policy, scoring weights, app class, QoS policy and
    topology wish. What ``MutateAdmission`` denies raises ValueError with its message: an app
    class other than online or offline; a QoS policy other than HAMi's three (online pods
    aside). An online pod's cores are left to the exact walk (``soft_split``: the arrays' sieve
    skips its core checks, as ``Fit`` does)."""
    del cordon  # no cordon annotation for sGPUs
    app_class = annotations.get(APP_CLASS)
    if app_class is not None and app_class not in (ONLINE, OFFLINE):
        raise ValueError(f"{APP_CLASS} must be set one of [{ONLINE}, {OFFLINE}]")
    qos = annotations.get(QOS_POLICY)
    if (
        app_class != ONLINE
        and qos is not None
        and qos not in (BEST_EFFORT, FIXED_SHARE, BURST_SHARE)
    ):
        raise ValueError(
            f"{QOS_POLICY} must be set one of [{BEST_EFFORT}, {FIXED_SHARE}, {BURST_SHARE}]"
        )
    weights = annotations.get(SCORING_WEIGHTS)
    return SgpuOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        use_uuids=frozenset(comma_list(annotations.get(USE_UUID))),
        nouse_uuids=frozenset(comma_list(annotations.get(NOUSE_UUID))),
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
        soft_split=app_class == ONLINE,
        app_class=app_class,
        qos=BEST_EFFORT if qos is None and app_class != ONLINE else (qos or ""),
        topology_aware=GO_BOOLS.get(annotations.get(TOPOLOGY_AWARE, "")),
    )


# -- the fit ---------------------------------------------------------------------------------------


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
    holders: Mapping[str, Sequence[Holder]] | None = None,
    placed: Sequence[Grant] = (),
) -> Walked:
    """``MetaxSDevices.Fit`` for one container. ``holders``: per card, the other pods' containers
    on it (else the seam's, ``opts.holders``); ``placed``: this pod's grants already counted in
    ``uses`` (else its earlier containers', ``given.earlier``)."""
    sgpu = opts if isinstance(opts, SgpuOptions) else SgpuOptions()
    held = cast(Mapping[str, Sequence[Holder]], opts.holders) if holders is None else holders
    placed = placed or given.earlier
    app_class = sgpu.app_class or ""
    online = app_class == ONLINE
    mutex = "mutex" in policy_words(opts.gpu_policy)
    reasons: Counter[str] = Counter()
    candidates: list[Card] = []
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        pods = held.get(card.id, ())
        if request.vendor != VENDOR:
            reasons["CardTypeMismatch"] += 1
            continue
        if not card.health:
            reasons[CARD_UNHEALTHY] += 1
            continue
        if not app_class_fits(app_class, use.used, pods):
            reasons[APP_CLASS_MISMATCH] += 1
            continue
        if not online:
            mine = [g for g in placed if g.uuid == card.id]
            switched = expected_qos(sgpu.qos, mine[-1].cores) if mine else None
            registered = card.qos_policy if isinstance(card, SgpuCard) else ""
            card_qos = device_qos(registered, pods, switched)
            if not qos_fits(sgpu.qos, use.used, request.coresreq, card_qos):
                reasons[QOS_MISMATCH] += 1
                continue
        mem = request.memory_on(card)
        refused = uuid_refusal(card, opts) or slot_refusal(card, use, mutex)
        if not refused and card.devmem - use.usedmem < mem:
            refused = "CardInsufficientMemory"
        if not refused and not online:
            refused = share_refusal(card, use, mem, request.coresreq, card.devcore)
        if refused:
            reasons[refused] += 1
            continue
        candidates.append(card)
    nums = request.nums
    if len(candidates) < nums:
        if candidates:
            reasons["AllocatedCardsInsufficientRequest"] = len(candidates)
        return None, reasons, None
    best = candidates[:nums]
    if len(candidates) > nums:
        if sgpu.app_class is not None:
            if online:
                chosen = prioritize_online([c.id for c in candidates], nums, held)
                by_id = {c.id: c for c in candidates}
                best = [by_id[uuid] for uuid in chosen]
        elif request.coresreq == WHOLE_CARD:
            zones = link_zones(candidates)
            order = prioritize_exclusive([LinkDevice(c.id, zones[c.id]) for c in candidates], nums)
            by_id = {c.id: c for c in candidates}
            best = [by_id[d.uuid] for d in order]
    cores = 0 if online else request.coresreq
    return [Grant(c.id, request.vendor, request.memory_on(c), cores) for c in best], reasons, None


# -- the node score --------------------------------------------------------------------------------


def topology_aware_enabled(
    containers: Sequence[Sequence[Grant]], opts: SgpuOptions, configured: bool
) -> bool:
    """``topologyAwareEnable``: the pod holds some whole card, and the pod's annotation (else
    ``sgpuTopologyAware``) turns it on."""
    if not any(g.cores == WHOLE_CARD for grants in containers for g in grants):
        return False
    return configured if opts.topology_aware is None else opts.topology_aware


def node_score(
    opts: FitOptions,
    containers: Sequence[Sequence[Grant]],
    previous: Sequence[tuple[Card, CardUse]],
    holders: Mapping[str, Sequence[Holder]],
    policy: str,
    configured: bool = False,
) -> float:
    """``ScoreNode`` weighted by ``OverrideScore``: what the sGPU adds to HAMi's score of a node
    that would give the pod ``containers``; ``previous`` is each card of the node with its usage
    before the pod, ``configured`` the ConfigMap's ``sgpuTopologyAware``."""
    sgpu = opts if isinstance(opts, SgpuOptions) else SgpuOptions()
    if sgpu.app_class == ONLINE and any(containers):
        raw = score_online(containers, holders)
    elif topology_aware_enabled(containers, sgpu, configured):
        zones = link_zones([card for card, _ in previous])
        taken = [
            LinkDevice(g.uuid, zones.get(g.uuid, 0))
            for grants in containers
            for g in grants
            if g.cores == WHOLE_CARD
        ]
        idle = [LinkDevice(card.id, zones[card.id]) for card, use in previous if use.used == 0]
        raw = score_exclusive(taken, idle)
    else:
        return 0.0
    return (-SCORE_WEIGHT if policy == "spread" else SCORE_WEIGHT) * raw


# -- the bind --------------------------------------------------------------------------------------


def _metax_device(grant: Grant) -> dict[str, object]:
    """``ContainerMetaxSDevice``: ``uuid``, then ``compute`` and ``vRam`` unless 0."""
    out: dict[str, object] = {"uuid": grant.uuid}
    if grant.cores:
        out["compute"] = grant.cores
    if grant.memory:
        out["vRam"] = grant.memory
    return out


def sgpu_annotations(
    pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
) -> dict[str, str]:
    """``PatchAnnotations``' own keys: per container, per card, its ``uuid``, ``compute`` and
    ``vRam`` (zeros left out, as Go's ``omitempty``) for MetaX's device plugin, and the time."""
    del pod
    metax = [[_metax_device(g) for g in grants] for grants in containers]
    seconds = int(now)
    nanos = seconds * 1_000_000_000 + round((now - seconds) * 1_000_000_000)
    return {
        ALLOCATED: json.dumps(metax, separators=(",", ":"), ensure_ascii=False),
        PREDICATE_TIME: str(nanos),
    }


def _score_node(seen: ScoreInput) -> float:
    """``ScoreNode``: the online pods' colocation score, or the MetaLink score."""
    previous = list(zip(seen.cards, seen.before, strict=True))
    holders = cast(Mapping[str, Sequence[Holder]], seen.opts.holders)
    return node_score(seen.opts, seen.grants, previous, holders, seen.policy)


METAX_SGPU = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=frozenset({COUNT, CORES, MEMORY}),
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
    score_node=_score_node,
    holders=card_holders,
    more_annotations=sgpu_annotations,
    more_keys=(ALLOCATED, PREDICATE_TIME),
    family="metax",
    memory_factor=MEMORY_FACTOR,
)
"""HAMi's MetaX sGPU dialect (the chart's ``metax`` section, sGPU resources)."""
