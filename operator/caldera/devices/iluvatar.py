"""Iluvatar CoreX GPUs the HAMi way (HAMi's ``pkg/device/iluvatar/device.go``).

HAMi shares Iluvatar's GPUs as one device per chip of its device ConfigMap's ``iluvatars`` list
(the chart's ``device-configmap.yaml``): MR-V100, MR-V50, BI-V150 and BI-V100, each named by its
``commonWord``. This module builds one :class:`~caldera.devices.vendor.Vendor` per chip, so a
cluster running Iluvatar's HAMi device plugin keeps it with Caldera as the scheduler. Per chip:

- the registration ``hami.io/node-<commonWord>-register`` (``GetNodeDevices``), in HAMi's colon
  form only, read as ``DecodeNodeDevices`` reads it: ``id,count,devmem,devcore,type,numa,health
  [,index,mode]:`` per card, count, memory and cores 32-bit, no space allowed around a number;
  no ``:`` at all, a segment without a comma or with another number of fields is an error, and
  a registration listing no card is "no gpu found on node";
- the request (``GenerateResourceRequests``, limits first): ``iluvatar.ai/<chip>-vgpu`` (a whole
  number, cut to 32 bits as Go's ``int32`` cuts it; 0 or less asks for nothing),
  ``iluvatar.ai/<chip>.vMem`` in units of 256 MiB (not a whole number in 0..MaxInt32/256: the
  request is emptied), ``iluvatar.ai/<chip>.vCore`` in percent of a card (a fraction is not
  read). No memory named asks for 100 % of each card's memory;
- the fit (``IluvatarDevices.Fit``): HAMi's walk from the end of the sorted cards, with only
  Iluvatar's checks, in its order: health, type (``checkType``: the request's type is the
  chip's), the UUID selectors ``hami.io/use-<commonWord>-uuid`` and ``hami.io/no-use-<commonWord>
  -uuid``, sharing slots, mutex, memory, cores (an ask above 100 is cut to 100), exclusive use,
  compute exhausted. There is no cordon, NUMA, topology, MIG or namespace-quota check: HAMi
  checks these vendors' quota in its admission webhook (``fitResourceQuota``), not in ``Fit``;
- at bind (``PatchAnnotations``): the allocation string (vendor word: the ``commonWord``) on
  ``hami.io/<commonWord>-devices-to-allocate`` and ``-allocated``; the node lock (``LockNode``)
  is HAMi's ``hami.io/mutex.lock``;
- ``ScoreNode`` is 0: nodes are ordered by HAMi's generic node score alone.

Not the scheduler's: HAMi's webhook (``MutateAdmission``) sets vCore to 100 per card for a count
above 1 and adds the ``SOL_CONTINER_NAME`` variable; a pod reaching the scheduler is fitted as it
asks. Nor is the handshake ``hami.io/node-handshake-<commonWord>`` (``CheckHealth``: HAMi's
liveness ping to the device plugin); Caldera reads a vanished plugin from the count resource
(:attr:`~caldera.devices.vendor.Vendor.count_resource` at 0).
"""

from __future__ import annotations

import dataclasses
import math
import re
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
    share_refusal,
    slot_refusal,
    uuid_refusal,
)
from caldera.devices.hami import (
    DEFAULTS,
    GO_BOOLS,
    INT32_MAX,
    decode_allocation,
    encode_allocation,
    go_int32,
    named,
    uuid_options,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, RequestReader, Vendor

__all__ = [
    "DEFAULT_CONFIGS",
    "ILUVATAR",
    "MEMORY_FACTOR",
    "IluvatarConfig",
    "decode_node_devices",
    "iluvatar_vendor",
    "iluvatar_walk",
    "registered_cards",
]

MEMORY_FACTOR = 256
"""MiB per ``vMem`` unit (``MemoryFactor``)."""
MAX_CORES = 100
"""``Fit``: "core limit can't exceed 100"."""
_INT64 = 2**63


@dataclass(frozen=True, slots=True)
class IluvatarConfig:
    """One entry of the device ConfigMap's ``iluvatars`` list (``IluvatarConfig``) and the
    annotations ``InitIluvatarDevice`` names after its ``commonWord``."""

    chip_name: str
    common_word: str
    resource_count_name: str
    resource_memory_name: str
    resource_core_name: str

    @property
    def register_annotation(self) -> str:
        return f"hami.io/node-{self.common_word}-register"

    @property
    def handshake_annotation(self) -> str:
        return f"hami.io/node-handshake-{self.common_word}"

    @property
    def use_uuid_annotation(self) -> str:
        return f"hami.io/use-{self.common_word}-uuid"

    @property
    def no_use_uuid_annotation(self) -> str:
        return f"hami.io/no-use-{self.common_word}-uuid"

    @property
    def to_allocate_annotation(self) -> str:
        """``InRequestDevices[commonWord]``."""
        return f"hami.io/{self.common_word}-devices-to-allocate"

    @property
    def allocated_annotation(self) -> str:
        """``SupportDevices[commonWord]``."""
        return f"hami.io/{self.common_word}-devices-allocated"


def _chip(word: str) -> IluvatarConfig:
    """A chip as the chart lists it: ``chipName`` is the ``commonWord``, the resources
    ``iluvatar.ai/<word>-vgpu``, ``.vMem`` and ``.vCore``."""
    prefix = f"iluvatar.ai/{word}"
    return IluvatarConfig(word, word, f"{prefix}-vgpu", f"{prefix}.vMem", f"{prefix}.vCore")


DEFAULT_CONFIGS: tuple[IluvatarConfig, ...] = tuple(
    _chip(w) for w in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
)
"""The chart's ``device-configmap.yaml`` ``iluvatars``, in its order."""


# -- registration ------------------------------------------------------------------------------

_GO_INT = re.compile(r"[+-]?[0-9]+")
"""What Go's ``strconv.ParseInt(s, 10, n)`` and ``Atoi`` accept: a sign, then digits only."""


def _go_int(raw: str, field: str, bits: int) -> int:
    """``strconv.ParseInt(raw, 10, bits)``: an error names the field as Go's does."""
    bound = 2 ** (bits - 1)
    if _GO_INT.fullmatch(raw) is None or not -bound <= int(raw) < bound:
        raise RegistrationError(f"invalid {field} field: {raw!r} is not a {bits}-bit integer")
    return int(raw)


def decode_node_devices(text: str) -> list[Card]:
    """``DecodeNodeDevices``: the cards of HAMi's colon form, as strictly as Go reads it."""
    if ":" not in text:
        raise RegistrationError("node annotation missing device separator")
    cards = []
    for segment in text.split(":"):
        if segment == "":
            continue
        if "," not in segment:
            raise RegistrationError(f"malformed node annotation segment: {segment!r}")
        items = segment.split(",")
        if len(items) not in (7, 9):
            raise RegistrationError(f"unexpected field count {len(items)} in node annotation")
        count = _go_int(items[1], "count", 32)
        devmem = _go_int(items[2], "memory", 32)
        devcore = _go_int(items[3], "core", 32)
        health = GO_BOOLS.get(items[6])
        if health is None:
            raise RegistrationError(f"invalid health field: {items[6]!r} is not a Go boolean")
        numa = _go_int(items[5], "numa", 64)
        mode, index = "hami-core", 0
        if len(items) == 9:
            index = _go_int(items[7], "index", 64)
            if index < 0:
                raise RegistrationError(f"index field must not be negative: {index}")
            mode = items[8]
        cards.append(
            Card(items[0], count, devmem, devcore, items[4], health, index, numa, mode=mode)
        )
    return cards


def registered_cards(text: str) -> list[Card]:
    """``GetNodeDevices``: the chip's cards a node registers; none is an error."""
    cards = decode_node_devices(text)
    if not cards:
        raise RegistrationError("no gpu found on node")
    return cards


# -- requests ----------------------------------------------------------------------------------


def _as_int64(value: float) -> int | None:
    """``Quantity.AsInt64``: the value when it is a whole number an int64 holds, else None."""
    if not math.isfinite(value) or value != int(value) or not -_INT64 <= value < _INT64:
        return None
    return int(value)


def _request_reader(config: IluvatarConfig) -> RequestReader:
    def container_request(
        limits: Mapping[str, float],
        requests: Mapping[str, float],
        defaults: DeviceDefaults = DEFAULTS,
    ) -> CardRequest | None:
        """``GenerateResourceRequests``: what a container asks of each card, or None (HAMi's
        ``Resourcereqs`` keeps a request only when its ``Nums`` is above 0). ``defaults`` play
        no part: Iluvatar has a fixed memory factor and no default memory or cores."""
        del defaults
        count = named(config.resource_count_name, limits, requests)
        whole = None if count is None else _as_int64(count)
        if whole is None or go_int32(whole) <= 0:
            return None
        memreq = 0
        memory = named(config.resource_memory_name, limits, requests)
        if memory is not None:
            units = _as_int64(memory)
            if units is None or not 0 <= units <= INT32_MAX // MEMORY_FACTOR:
                return None  # "rejecting to avoid silent under-allocation"
            memreq = units * MEMORY_FACTOR
        coresreq = 0
        cores = named(config.resource_core_name, limits, requests)
        if cores is not None and (asked := _as_int64(cores)) is not None:
            coresreq = go_int32(asked)
        return CardRequest(
            vendor=config.common_word,
            nums=go_int32(whole),
            memreq=memreq,
            mem_percentage=100 if memreq == 0 else 0,
            coresreq=coresreq,
        )

    return container_request


# -- fit ---------------------------------------------------------------------------------------


def iluvatar_walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``IluvatarDevices.Fit`` for one container: the cards sorted by HAMi's GPU policy, walked
    from the last, each card failing on its first failed check; the first ``nums`` cards that
    pass are taken. ``opts.quota`` and ``given`` are not read: Iluvatar's ``Fit`` checks no
    quota."""
    del given
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
        if request.vendor != vendor:  # checkType: the request's type is the commonWord
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
        taken.append(Grant(card.id, request.vendor, mem, cores))
        nums -= 1
        if nums == 0:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


# -- the vendors -------------------------------------------------------------------------------


def iluvatar_vendor(config: IluvatarConfig) -> Vendor:
    """The :class:`Vendor` for one ``iluvatars`` entry."""
    return Vendor(
        name=config.common_word,
        register_annotation=config.register_annotation,
        resources=frozenset(
            {config.resource_count_name, config.resource_memory_name, config.resource_core_name}
        ),
        quota_memory=config.resource_memory_name,
        quota_cores=config.resource_core_name,
        keys=dataclasses.replace(
            HAMI_KEYS,
            to_allocate=config.to_allocate_annotation,
            allocated=config.allocated_annotation,
        ),
        count_resource=config.resource_count_name,
        read_cards=registered_cards,
        read_request=_request_reader(config),
        read_options=uuid_options(config.use_uuid_annotation, config.no_use_uuid_annotation),
        encode=encode_allocation,
        decode=decode_allocation,
        cordon_annotation="",
        walk=iluvatar_walk,
        family="iluvatar",
        memory_factor=MEMORY_FACTOR,
    )


ILUVATAR: tuple[Vendor, ...] = tuple(iluvatar_vendor(c) for c in DEFAULT_CONFIGS)
"""HAMi's Iluvatar dialect for every chip of its default device ConfigMap."""
