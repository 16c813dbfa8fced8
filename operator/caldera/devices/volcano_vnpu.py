"""Huawei Ascend NPUs the Volcano way: Volcano's own HAMi vNPU dialect.

``deviceshare.AscendHAMiVNPUEnable`` turns it on. It follows Volcano's scheduler, not HAMi's:
``pkg/scheduler/api/devices/ascend/hami`` (``device_info.go``, ``constants.go``) at ed72c7c8, on
the card types of the device ConfigMap (:mod:`caldera.devices.volcano_vnpu_config`). What it
shares with HAMi's Ascend dialect (:mod:`caldera.devices.ascend`) is the protocol with HAMi's
Ascend device plugin: the registration ``hami.io/node-register-<commonWord>`` (HAMi's JSON, a
card's ``custominfo.NetworkID`` kept), the keys ``hami.io/<commonWord>-devices-to-allocate`` and
``-allocated``, ``huawei.com/vnpu-mode: hami-core`` (soft split), the node's ``hami-vnpu-core``,
and the templates with their ``trimMemory``. What Volcano does its own way:

- **registration** (``NewAscendDevices``, ``getNodeDevices``): a node has cards of a type only
  when its allocatable counts the type's resource above 0; a card's health and type are not read;
- **request** (``ExtractResourceRequest``): only app containers, by the count or the memory in
  their limits (a memory alone asks for one card); memory and AI cores from limits, then
  requests, as Go's ``int32`` of the whole value (no range check, no memory factor); no memory
  means the whole card;
- **memory** (``ResourceReqs``): the scheduler rounds it up to a template (``trimMemory``); the
  whole card is the first card's memory in the walk's order; a soft split takes it as asked. A
  hard split on several cards must take whole cards (``verifyReq``);
- **fit** (``selectDevices``, ``fit``): the cards are ordered by ``deviceshare.SchedulePolicy``
  (``CalScore``: binpack the fullest first, spread the unused first, none in registration order)
  and walked from the first; a pod's containers never share a card; no health, UUID selector or
  100-core cap; on 910 cards that all carry a NetworkID, every fitting card is collected and the
  network with the most of them is filled first, one card too (``selectDevicesWithTopology``);
  910C has no modules of its own;
- **bind** (``Allocate``, ``CreateAnnotations``): the allocation lists only the containers that
  asked; ``huawei.com/<commonWord>`` says, per NPU, its UUID and template (hard split) or its
  memory and cores (soft split); the node lock ``hami.io/mutex.lock`` is the bare RFC 3339 time,
  stale after 5 minutes (``nodelock.LockNode``);
- **score** (``ScoreNode``, ``getDeviceScore``): :func:`node_score`, summed over the pod's
  card types, rounded and multiplied by ``deviceshare.ScheduleWeight``, alone (no usage score).

Init containers get no NPU (``ResourceReqs`` reads ``pod.Spec.Containers``). Reason words
are HAMi's for the check that fails (``CardInsufficientMemory``...), where Volcano says
``no ascend device available`` for all of them. Deliberate differences from Volcano:

- a node without NPUs of the type asked (none registered, or a registration that cannot be
  read) is refused (``NodeInsufficientDevice``); Volcano's predicate skips a device type the
  node lacks, so there only the count's resource fit stands in the way, and a pod asking memory
  alone (or a node counting the resource with a broken registration) is bound without cards;
- usage is rebuilt from every container's cards; Volcano's ``addResource`` decodes the whole
  allocation as one container, so a card after the first ``;`` gets a UUID beginning with ``;``,
  is not found, and is never counted;
- ties in the card order keep registration order (Go sorts a map: any order); allocation uses
  the filter's order, where Volcano's ``Allocate`` uses the policy its last ``ScoreNode`` set
  (none when ``deviceshare.ScheduleWeight`` is 0, i.e. Go's map order).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from caldera.devices.ascend import (
    HAMI_CORE,
    NODE_HAMI_CORE,
    VNPU_MODE,
    VnpuConfig,
    by_network,
    node_reader,
)
from caldera.devices.ascend import registered_cards as ascend_cards
from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walk,
    Walked,
    share_refusal,
    slot_refusal,
)
from caldera.devices.hami import (
    as_int64,
    decode_allocation,
    encode_allocation,
    go_int32,
    named,
)
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import (
    HAMI_KEYS,
    BindPod,
    CapacityReader,
    MoreAnnotations,
    NodeScore,
    OptionsReader,
    RequestReader,
    ScoreInput,
    Vendor,
)
from caldera.devices.volcano_vnpu_config import CHART_TYPES, DevicesConfig, VnpuType

__all__ = [
    "FAMILY",
    "HELD_BY_POD",
    "IGNORED_RESOURCES",
    "PARTIAL_MEMORY",
    "VOLCANO_VNPU",
    "card_refusal",
    "card_score",
    "container_memory",
    "encode_containers",
    "node_score",
    "verify_request",
    "vnpu_vendor",
    "vnpu_vendors",
]

FAMILY = "volcano-vnpu"
"""Turned on by ``deviceshare.AscendHAMiVNPUEnable``, never by ``deviceshare.Vendors``."""
PREFIX_910 = "Ascend910"
NETWORK_WEIGHT = 10
"""``Ascend910NetworkWeight``: a node score's share for cards on one network."""
BINPACK, SPREAD = "binpack", "spread"
MULTIPLIER = 100
"""``binpackMultiplier``, ``spreadMultiplier``."""
LOCK_EXPIRY = 300.0
"""``LockNode``: another pod's lock older than 5 minutes is taken over."""
PARTIAL_MEMORY = "PartialMemoryOnSeveralCards"
"""``verifyReq``: "vNPU does not support partial memory allocation when requesting multiple
devices" (Volcano's ``FilterNode`` status ``Error``: no eviction cures it)."""
HELD_BY_POD = "CardTakenByEarlierContainer"
"""A card an earlier container of the pod was given (``selectDevices``' ``usedDevs``)."""
INSUFFICIENT = "AllocatedCardsInsufficientRequest"


def card_score(policy: str, card: Card, use: CardUse) -> float:
    """``CalScore``: binpack, the share of the card's memory in use (x100); spread, 100 for an
    unused card; no policy, 0. A card without memory scores 0."""
    if card.devmem == 0:
        return 0.0
    if policy == BINPACK:
        return MULTIPLIER * (use.usedmem / card.devmem)
    if policy == SPREAD:
        return float(MULTIPLIER) if use.used == 0 else 0.0
    return 0.0


def card_refusal(card: Card, use: CardUse, memory: int, cores: int, opts: FitOptions) -> str | None:
    """``fit``: why the card cannot take ``memory`` MiB and ``cores`` (None: it can). A soft
    split needs a node that allows it and counts cores in percent."""
    if opts.soft_split and not opts.node_soft_split:
        return "ModeNotFit"
    compute = 100 if opts.soft_split else card.devcore
    return slot_refusal(card, use, False) or share_refusal(card, use, memory, cores, compute)


def container_memory(npu: VnpuConfig, request: CardRequest, first: Card, soft: bool) -> int:
    """``ResourceReqs``: the MiB each card gives the container. No memory asked: the whole of
    ``first`` (the first card in the walk's order); a hard split rounds up to a template, or to
    the whole card, or to 0 past the card's capacity (``trimMemory``)."""
    memory = request.memreq
    if memory == 0 and request.mem_percentage != 0:
        memory = go_int32(first.devmem * request.mem_percentage // 100)
    if memory > 0 and not soft:
        memory = npu.trim_memory(memory)[0]
    return memory


def verify_request(npu: VnpuConfig, nums: int, memory: int) -> str | None:
    """``verifyReq``: a hard split on several cards takes whole cards."""
    if nums > 1 and npu.trim_memory(memory)[0] != npu.memory_allocatable:
        return PARTIAL_MEMORY
    return None


def _walker(vnpu: VnpuType, policy: str) -> Walk:
    npu = vnpu.npu
    topology_type = npu.common_word.startswith(PREFIX_910)

    def walk(
        cards: Sequence[Card],
        uses: list[CardUse],
        request: CardRequest,
        opts: FitOptions,
        vendor: str,
        given: Given = NO_GIVEN,
    ) -> Walked:
        """``selectDevices`` for one container: the NPUs it gets, or why each said no."""
        reasons: Counter[str] = Counter()
        if not cards:  # "no ascend device available" (status Error)
            reasons["NodeInsufficientDevice"] += 1
            return None, reasons, None
        scores = [card_score(policy, c, u) for c, u in zip(cards, uses, strict=True)]
        order = sorted(range(len(cards)), key=lambda i: -scores[i])
        soft = opts.soft_split
        memory = container_memory(npu, request, cards[order[0]], soft)
        refused = None if soft else verify_request(npu, request.nums, memory)
        if refused:
            reasons[refused] = len(cards)
            return None, reasons, None
        held = {g.uuid for g in given.earlier}
        topology = topology_type and all(c.network is not None for c in cards)
        nums = request.nums
        chosen: list[Card] = []
        for i in order:
            card = cards[i]
            if card.id in held:
                refused = HELD_BY_POD
            else:
                refused = card_refusal(card, uses[i], memory, request.coresreq, opts)
            if refused:
                reasons[refused] += 1
                continue
            chosen.append(card)
            nums -= 1
            if nums <= 0 and not topology:
                break
        if nums > 0:
            if chosen:
                reasons[INSUFFICIENT] = len(chosen)
            return None, reasons, None
        if topology:
            chosen = by_network([(c, c) for c in chosen], request.nums)
        grants = [Grant(c.id, request.vendor, memory, request.coresreq) for c in chosen]
        return grants, reasons, None

    return walk


def _as_int64(value: float) -> int:
    """``Quantity.AsInt64``, its ``ok`` ignored as Volcano does: 0 when it fails."""
    return as_int64(value) or 0


def _request_reader(vnpu: VnpuType) -> RequestReader:
    def container_request(
        limits: Mapping[str, float], requests: Mapping[str, float], defaults: DeviceDefaults
    ) -> CardRequest | None:
        """``ExtractResourceRequest``: None when the limits name neither the count nor the
        memory; the configured defaults do not apply."""
        del defaults
        count = limits.get(vnpu.resource_name)
        if count is not None:
            nums = go_int32(_as_int64(count))
        elif vnpu.resource_memory_name in limits:
            nums = 1
        else:
            return None
        memory = named(vnpu.resource_memory_name, limits, requests)
        memreq = 0 if memory is None else go_int32(_as_int64(memory))
        cores = named(vnpu.resource_core_name, limits, requests)
        return CardRequest(
            vendor=vnpu.common_word,
            nums=nums,
            memreq=memreq,
            mem_percentage=100 if memreq == 0 else UNSET_PERCENTAGE,
            coresreq=0 if cores is None else go_int32(_as_int64(cores)),
        )

    return container_request


def _annotation_reader(name: str) -> Callable[[str], list[Card]]:
    def read(text: str) -> list[Card]:
        """``UnMarshalNodeDevices``; none at all is an error. Each card is typed with the
        vendor's name (Volcano never reads the registered type)."""
        return [dataclasses.replace(c, type=name) for c in ascend_cards(text)]

    return read


def _capacity_reader(vnpu: VnpuType, key: str, name: str) -> CapacityReader:
    read = _annotation_reader(name)

    def node_cards(
        node: str,
        annotations: Mapping[str, str],
        capacity: Mapping[str, float],
        labels: Mapping[str, str],
    ) -> list[Card]:
        """``NewAscendDevices``: no cards where the node counts none of the resource, else
        ``getNodeDevices`` on the registration."""
        del node, labels
        if not capacity.get(vnpu.resource_name):
            return []
        text = annotations.get(key)
        if text is None:
            raise RegistrationError(f"annos not found {key}")
        return read(text)

    return node_cards


def _options_reader(policy: str) -> OptionsReader:
    def pod_options(
        annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
    ) -> FitOptions:
        """The pod's vNPU mode; the card order is ``deviceshare.SchedulePolicy``'s, whatever
        the pod or HAMi's GPU policy says."""
        del gpu_policy, cordon
        return FitOptions(gpu_policy=policy, soft_split=annotations.get(VNPU_MODE) == HAMI_CORE)

    return pod_options


def encode_containers(containers: Sequence[Sequence[Grant]]) -> str:
    """``EncodePodSingleDevice``: one entry per container that asked (the others have none)."""
    return encode_allocation([grants for grants in containers if grants])


def _runtime_info(npu: VnpuConfig) -> MoreAnnotations:
    key = f"huawei.com/{npu.common_word}"

    def annotations(
        pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
    ) -> dict[str, str]:
        """``CreateAnnotations``' own keys: ``predicate-time`` and the ``RuntimeInfo`` list, per
        NPU its UUID with its template (hard split) or memory and cores (soft split), zero
        fields left out (``omitempty``); no NPU at all is Go's ``null``."""
        soft = pod.annotations.get(VNPU_MODE) == HAMI_CORE
        infos: list[dict[str, object]] = []
        for grants in containers:
            for g in grants:
                info: dict[str, object] = {"UUID": g.uuid} if g.uuid else {}
                if soft:
                    info.update({k: v for k, v in (("memory", g.memory), ("core", g.cores)) if v})
                elif template := npu.trim_memory(g.memory)[1]:
                    info["temp"] = template
                infos.append(info)
        value = json.dumps(infos, separators=(",", ":")) if infos else "null"
        return {"predicate-time": str(int(now)), key: value}

    return annotations


def node_score(vnpu: VnpuType, policy: str) -> NodeScore:
    """``ScoreNode``, to be added up over the pod's device types, rounded (``floor(s + 0.5)``)
    and multiplied by ``deviceshare.ScheduleWeight``, with nothing else (Volcano's
    ``getDeviceScore``: :attr:`~caldera.devices.vendor.Vendor.score_alone`)."""
    topology_type = vnpu.common_word.startswith(PREFIX_910)

    def score(seen: ScoreInput) -> float:
        """The ``CalScore`` of the first NPU of each container (its usage before the pod), and,
        on 910 cards that all carry a NetworkID, 10 times the share of them on one network."""
        at = {c.id: i for i, c in enumerate(seen.cards)}
        firsts: list[int] = []
        for grants in seen.grants:
            if grants:
                if grants[0].uuid not in at:
                    return 0.0
                firsts.append(at[grants[0].uuid])
        total = sum(card_score(policy, seen.cards[i], seen.before[i]) for i in firsts)
        if topology_type and all(seen.cards[i].network is not None for i in firsts):
            networks = Counter(seen.cards[i].network for i in firsts)
            if not networks:
                return 0.0
            total += max(networks.values()) / len(firsts) * NETWORK_WEIGHT
        return total

    return score


def vendor_name(word: str) -> str:
    """The vendor's name, and the type its cards are given: apart from HAMi's Ascend dialect,
    which reads the same registrations."""
    return f"volcano-{word}"


def vnpu_vendor(vnpu: VnpuType, hami_core: bool = False, policy: str = "") -> Vendor:
    """The :class:`Vendor` of one card type: ``hami_core`` is the configured ``hamiVnpuCore``,
    ``policy`` is ``deviceshare.SchedulePolicy``."""
    word, name = vnpu.common_word, vendor_name(vnpu.common_word)
    register = f"hami.io/node-register-{word}"
    return Vendor(
        name=name,
        register_annotation=register,
        resources=frozenset({vnpu.resource_memory_name, vnpu.resource_core_name}),
        quota_memory=vnpu.resource_memory_name,
        quota_cores=vnpu.resource_core_name,
        keys=dataclasses.replace(
            HAMI_KEYS,
            to_allocate=f"hami.io/{word}-devices-to-allocate",
            allocated=f"hami.io/{word}-devices-allocated",
        ),
        count_resource=vnpu.resource_name,
        read_cards=_annotation_reader(name),
        read_request=_request_reader(vnpu),
        read_options=_options_reader(policy),
        encode=encode_containers,
        decode=decode_allocation,
        cordon_annotation="",
        walk=_walker(vnpu, policy),
        read_node=node_reader(hami_core),  # getNodeDevices: the node's word first
        node_keys=(NODE_HAMI_CORE,),
        more_annotations=_runtime_info(vnpu.npu),
        more_keys=("predicate-time", f"huawei.com/{word}"),
        core_unit=" AI cores",
        screened=False,
        from_capacity=_capacity_reader(vnpu, register, name),
        capacity_names=(vnpu.resource_name,),
        family=FAMILY,
        memory_factor=1,
        lock_expiry=LOCK_EXPIRY,
        bare_lock=True,
        count_in_fit=True,
        app_only=True,
        score_node=node_score(vnpu, policy),
        score_alone=True,
    )


@functools.lru_cache(maxsize=16)
def vnpu_vendors(config: DevicesConfig, policy: str = "") -> tuple[Vendor, ...]:
    """One vendor per card type of ``config`` (Volcano registers one device per
    ``commonWord``)."""
    return tuple(vnpu_vendor(t, config.hami_vnpu_core, policy) for t in config.types)


VOLCANO_VNPU: tuple[Vendor, ...] = vnpu_vendors(DevicesConfig(CHART_TYPES))
"""The card types of HAMi's chart ConfigMap, as registered vendors (their annotations and
resources); a session schedules with those of the device ConfigMap it reads."""
IGNORED_RESOURCES: frozenset[str] = frozenset().union(*(v.resources for v in VOLCANO_VNPU))
"""``GetIgnoredDevices``: the memory and core resources, left out of the generic resource fit.
The count stays in it, checked against the node's allocatable."""
