"""Huawei Ascend NPUs the HAMi way (HAMi's ``pkg/device/ascend``: ``device.go``, ``vnpu.go``).

One :class:`~caldera.devices.vendor.Vendor` per card type of HAMi's device ConfigMap (the chart's
``device-configmap.yaml``, ``vnpus.configs``): Ascend910A, 910B2, 910B3, 910B4-1, 910B4, 310P and
910C, each named by its ``commonWord``:

- the registration ``hami.io/node-register-<commonWord>``: HAMi's JSON (``UnMarshalNodeDevices``;
  an empty list is "no device found on node"), a card's ``custominfo.NetworkID`` kept;
- the request: ``huawei.com/<commonWord>`` (count), ``-memory`` (MiB, times the config's memory
  factor; more than 2^31-1 is a byte quantity by mistake and empties the request) and ``-core``
  (AI cores), limits first (``GenerateResourceRequests``); no memory means the whole card;
- the fit (``Devices.Fit``): HAMi's card walk without NUMA or cordon; ``huawei.com/vnpu-mode:
  hami-core`` (soft split) counts cores in percent and needs a node that supports it (the node's
  ``hami-vnpu-core`` annotation, else the config's ``hamiVnpuCore``: ``ModeNotFit``); on 910
  cards that all carry a NetworkID every fitting card is collected and the network with the
  most of them is filled first (``computeBestCombination``); 910C takes whole two-NPU modules
  (``computeBestCombination910C``);
- the bind (``PatchAnnotations``): the allocation in ``hami.io/<commonWord>-devices-to-allocate``
  and ``-allocated``, ``predicate-time``, and ``huawei.com/<commonWord>``: per NPU its UUID,
  memory, cores and, for a hard split, the template its memory rounds up to (``trimMemory``).

Memory is rounded up to a template by HAMi's webhook (``MutateAdmission``), not by the
scheduler: a pod that reaches the scheduler unrounded is fitted as it asks.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walk,
    Walked,
    card_order,
    policy_words,
    share_refusal,
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
    named,
    scoring_weights,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import (
    HAMI_KEYS,
    BindPod,
    MoreAnnotations,
    NodeReader,
    OptionsReader,
    RequestReader,
    Vendor,
)

__all__ = [
    "ASCEND",
    "DEFAULT_CONFIGS",
    "HAMI_CORE",
    "NODE_HAMI_CORE",
    "VNPU_MODE",
    "Template",
    "VnpuConfig",
    "ascend_vendor",
    "by_network",
    "node_reader",
    "registered_cards",
]

T = TypeVar("T")

VNPU_MODE = "huawei.com/vnpu-mode"
"""The pod's vNPU mode: ``hami-core`` is the soft split (HAMi-core), anything else the hard
split by templates."""
HAMI_CORE = "hami-core"
NODE_HAMI_CORE = "hami-vnpu-core"
"""The node annotation (``"true"``) saying its NPUs can be soft split; it outranks the config."""
PREFIX_910 = "Ascend910"
TYPE_910C = "Ascend910C"
NPUS_PER_MODULE = 2
"""A 910C module holds two NPUs (``MaxCardNPUNum``)."""


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    memory: int
    ai_core: int = 0
    ai_cpu: int = 0


@dataclass(frozen=True, slots=True)
class VnpuConfig:
    """One entry of ``vnpus.configs``: a card type and its hard-split templates."""

    chip_name: str
    common_word: str
    memory_allocatable: int
    memory_capacity: int
    memory_factor: int
    ai_core: int
    ai_cpu: int
    templates: tuple[Template, ...]
    """By memory, smallest first (``InitDevices`` sorts them)."""
    super_pod: bool = False

    @property
    def resource_name(self) -> str:
        return f"huawei.com/{self.common_word}"

    @property
    def resource_memory_name(self) -> str:
        return f"huawei.com/{self.common_word}-memory"

    @property
    def resource_core_name(self) -> str:
        return f"huawei.com/{self.common_word}-core"

    def trim_memory(self, memory: int) -> tuple[int, str]:
        """``trimMemory``: the smallest template holding ``memory`` MiB (memory, name); else the
        whole card when ``memory`` fits its capacity (no name); else (0, "")."""
        for t in self.templates:
            if memory <= t.memory:
                return t.memory, t.name
        if memory <= self.memory_capacity:
            return self.memory_allocatable, ""
        return 0, ""


def _config(
    chip: str,
    word: str,
    memory: tuple[int, int, int],
    cores: tuple[int, int],
    templates: Sequence[tuple[str, int, int, int]],
    super_pod: bool = False,
) -> VnpuConfig:
    allocatable, capacity, factor = memory
    return VnpuConfig(
        chip,
        word,
        allocatable,
        capacity,
        factor,
        cores[0],
        cores[1],
        tuple(sorted((Template(*t) for t in templates), key=lambda t: t.memory)),
        super_pod,
    )


DEFAULT_CONFIGS: tuple[VnpuConfig, ...] = (
    _config(
        "910A",
        "Ascend910A",
        (32768, 32768, 1),
        (30, 0),
        [
            ("vir02", 2184, 2, 0),
            ("vir04", 4369, 4, 0),
            ("vir08", 8738, 8, 0),
            ("vir16", 17476, 16, 0),
        ],
    ),
    _config(
        "910B2",
        "Ascend910B2",
        (65536, 65536, 1),
        (24, 6),
        [
            ("vir03_1c_8g", 8192, 3, 1),
            ("vir06_1c_16g", 16384, 6, 1),
            ("vir12_3c_32g", 32768, 12, 3),
        ],
    ),
    _config(
        "910B3",
        "Ascend910B3",
        (65536, 65536, 1),
        (20, 7),
        [("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3)],
    ),
    _config(
        "910B4-1",
        "Ascend910B4-1",
        (65536, 65536, 1),
        (20, 7),
        [("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3)],
    ),
    _config(
        "910B4",
        "Ascend910B4",
        (32768, 32768, 1),
        (20, 7),
        [("vir05_1c_8g", 8192, 5, 1), ("vir10_3c_16g", 16384, 10, 3)],
    ),
    _config(
        "310P3",
        "Ascend310P",
        (21527, 24576, 1),
        (8, 7),
        [("vir01", 3072, 1, 1), ("vir02", 6144, 2, 2), ("vir04", 12288, 4, 4)],
    ),
    _config(
        "Ascend910",
        "Ascend910C",
        (65536, 65536, 0),
        (20, 7),
        [("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3)],
        super_pod=True,
    ),
)
"""The chart's ``device-configmap.yaml`` ``vnpus.configs``, in its order (910C names no memory
factor: 0, which leaves memory as asked)."""


def registered_cards(text: str) -> list[Card]:
    """The NPUs a node registers (``UnMarshalNodeDevices``), each with its
    ``custominfo.NetworkID``; none at all is an error (``GetNodeDevices``)."""
    cards = from_json(text, _network)
    if not cards:
        raise RegistrationError("no device found on node")
    return cards


def _network(card: Card, fields: Mapping[str, object]) -> Card:
    custom = fields.get("custominfo")
    network = custom.get("NetworkID") if isinstance(custom, dict) else None
    if isinstance(network, int | float) and not isinstance(network, bool):
        return dataclasses.replace(card, network=int(network))
    return card


def _request_reader(config: VnpuConfig) -> RequestReader:
    def container_request(
        limits: Mapping[str, float],
        requests: Mapping[str, float],
        defaults: DeviceDefaults,
    ) -> CardRequest | None:
        """``GenerateResourceRequests``: None when no whole count in 1..2^31-1 is asked, or
        memory or cores are out of range."""
        count = named(config.resource_name, limits, requests)
        if count is None or count != int(count) or not 0 < count <= INT32_MAX:
            return None
        memreq = 0
        memory = named(config.resource_memory_name, limits, requests)
        if memory is not None:
            if memory < 0:
                return None
            if memory == int(memory):  # AsInt64: a fractional quantity is not read
                if memory > INT32_MAX:
                    return None  # MiB, not bytes: 16Gi is a mistake
                memreq = int(memory)
                if config.memory_factor > 1:
                    memreq *= config.memory_factor
                    if memreq > INT32_MAX:
                        return None
        cores = 0
        value = named(config.resource_core_name, limits, requests)
        if value is not None:
            if not 0 <= value <= INT32_MAX:
                return None
            cores = int(value)
        return CardRequest(
            vendor=config.common_word,
            nums=int(count),
            memreq=memreq,
            mem_percentage=100 if memreq == 0 else 0,
            coresreq=cores,
        )

    return container_request


def _options_reader(config: VnpuConfig) -> OptionsReader:
    use, nouse = (
        f"hami.io/use-{config.common_word}-uuid",
        f"hami.io/no-use-{config.common_word}-uuid",
    )

    def pod_options(
        annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
    ) -> FitOptions:
        """The pod's UUID selectors, GPU policy, scoring weights and vNPU mode."""
        weights = annotations.get(SCORING_WEIGHTS)
        return FitOptions(
            gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
            use_uuids=frozenset(comma_list(annotations.get(use))),
            nouse_uuids=frozenset(comma_list(annotations.get(nouse))),
            weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
            soft_split=annotations.get(VNPU_MODE) == HAMI_CORE,
        )

    return pod_options


def node_reader(default: bool) -> NodeReader:
    def node_options(annotations: Mapping[str, str], opts: FitOptions) -> FitOptions:
        """The node's ``hami-vnpu-core`` outranks the configured default."""
        said = annotations.get(NODE_HAMI_CORE)
        supports = default if said is None else said == "true"
        return dataclasses.replace(opts, node_soft_split=supports)

    return node_options


def _walker(config: VnpuConfig) -> Walk:
    word = config.common_word
    topology_type = word.startswith(PREFIX_910)
    modules = word == TYPE_910C

    def walk(
        cards: Sequence[Card],
        uses: list[CardUse],
        request: CardRequest,
        opts: FitOptions,
        vendor: str,
        given: Given = NO_GIVEN,
    ) -> Walked:
        """``Devices.Fit`` for one container: the NPUs it gets, or why each said no."""
        reasons: Counter[str] = Counter()
        if opts.soft_split and not opts.node_soft_split:
            reasons["ModeNotFit"] += 1
            return None, reasons, len(cards)
        wanted = request.nums
        whole = modules and wanted > 1  # 910C: whole modules, chosen after the walk
        topology = topology_type and all(c.network is not None for c in cards)
        mutex = "mutex" in policy_words(opts.gpu_policy)
        cores = min(request.coresreq, 100)
        nums = wanted
        taken: list[tuple[Card, Grant]] = []
        for i in reversed(card_order(cards, uses, request, opts)):
            card, use = cards[i], uses[i]
            if not card.health:
                reasons["CardNotHealth"] += 1
                continue
            mem = request.memory_on(card)
            compute = 100 if opts.soft_split else card.devcore
            refused = (
                uuid_refusal(card, opts)
                or slot_refusal(card, use, mutex)
                or share_refusal(card, use, mem, cores, compute)
            )
            if refused:
                reasons[refused] += 1
                continue
            if nums > 0:
                if not topology and not whole:
                    nums -= 1
                taken.append((card, Grant(card.id, request.vendor, mem, cores)))
            if nums == 0 and not topology and not whole:
                return [g for _, g in taken], reasons, None
        if whole:
            chosen = _by_module(taken, wanted)
            if len(chosen) != wanted:
                reasons["AllocatedCardsInsufficientRequest"] = len(chosen)
                return None, reasons, wanted
            return chosen, reasons, None
        if topology and len(taken) == wanted:
            return [g for _, g in taken], reasons, None
        if topology and len(taken) > wanted:
            if wanted == 1:
                return [taken[0][1]], reasons, None
            return by_network(taken, wanted), reasons, None
        if taken:
            reasons["AllocatedCardsInsufficientRequest"] = len(taken)
        return None, reasons, None

    return walk


def by_network(taken: Sequence[tuple[Card, T]], wanted: int) -> list[T]:
    """``computeBestCombination`` (and Volcano's ``selectDevicesWithTopology``): what goes with
    the NPUs of the networks holding the most of ``taken`` first (ties in the order the walk met
    them: Go's map order is random), each network taken whole until ``wanted``."""
    groups: dict[int, list[T]] = {}
    for card, item in taken:
        if card.network is not None:
            groups.setdefault(card.network, []).append(item)
    out: list[T] = []
    for group in sorted(groups.values(), key=len, reverse=True):
        for item in group:
            out.append(item)
            if len(out) == wanted:
                return out
    return out


def _by_module(taken: Sequence[tuple[Card, Grant]], wanted: int) -> list[Grant]:
    """``computeBestCombination910C``: NPUs two to a module (index // 2); only modules whose two
    NPUs both fit are taken, until ``wanted`` NPUs or more are chosen."""
    modules: dict[int, list[Grant]] = {}
    for card, grant in taken:
        modules.setdefault(card.index // NPUS_PER_MODULE, []).append(grant)
    out: list[Grant] = []
    for grants in sorted(modules.values(), key=len, reverse=True):
        if len(out) >= wanted:
            break
        if len(grants) == NPUS_PER_MODULE:
            out.extend(grants)
    return out


def _runtime_info(config: VnpuConfig) -> MoreAnnotations:
    key = f"huawei.com/{config.common_word}"

    def annotations(
        pod: BindPod, containers: Sequence[Sequence[Grant]], now: float
    ) -> dict[str, str]:
        """``PatchAnnotations``' own keys: ``predicate-time`` and, per NPU, what the runtime
        sets up (the template only for a hard split; Go leaves zero fields out)."""
        soft = pod.annotations.get(VNPU_MODE) == HAMI_CORE
        infos = []
        for grants in containers:
            for g in grants:
                info: dict[str, object] = {"UUID": g.uuid}
                if not soft:
                    template = config.trim_memory(g.memory)[1]
                    if template:
                        info["temp"] = template
                if g.memory:
                    info["memory"] = g.memory
                if g.cores:
                    info["core"] = g.cores
                infos.append(info)
        return {"predicate-time": str(int(now)), key: json.dumps(infos, separators=(",", ":"))}

    return annotations


def ascend_vendor(config: VnpuConfig, hami_core_default: bool = False) -> Vendor:
    """The :class:`Vendor` for one ``vnpus.configs`` entry."""
    word = config.common_word
    return Vendor(
        name=word,
        register_annotation=f"hami.io/node-register-{word}",
        resources=frozenset(
            {config.resource_name, config.resource_memory_name, config.resource_core_name}
        ),
        quota_memory=config.resource_memory_name,
        quota_cores=config.resource_core_name,
        keys=dataclasses.replace(
            HAMI_KEYS,
            to_allocate=f"hami.io/{word}-devices-to-allocate",
            allocated=f"hami.io/{word}-devices-allocated",
        ),
        count_resource=config.resource_name,
        read_cards=registered_cards,
        read_request=_request_reader(config),
        read_options=_options_reader(config),
        encode=encode_allocation,
        decode=decode_allocation,
        cordon_annotation="",
        walk=_walker(config),
        read_node=node_reader(hami_core_default),
        node_keys=(NODE_HAMI_CORE,),
        more_annotations=_runtime_info(config),
        more_keys=("predicate-time", f"huawei.com/{word}"),
        walk_decides=_decides(config),
        core_unit=" AI cores",
        family="ascend",
    )


def _decides(config: VnpuConfig) -> Callable[[CardRequest, FitOptions], bool]:
    modules = config.common_word == TYPE_910C

    def walk_decides(request: CardRequest, opts: FitOptions) -> bool:
        """A soft split (cores in percent, the node's support) or 910C modules."""
        return opts.soft_split or (modules and request.nums > 1)

    return walk_decides


ASCEND: tuple[Vendor, ...] = tuple(ascend_vendor(c) for c in DEFAULT_CONFIGS)
"""HAMi's Ascend dialect for every card type of its default device ConfigMap."""
