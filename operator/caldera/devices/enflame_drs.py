"""The DRS profile fit of Enflame GCUs, the HAMi way (HAMi's ``pkg/device/enflame/device.go``:
``selectProfileByRequest``, ``collectDRSProfiles``, ``Fit``, ``AddResourceUsage``).

A DRS request names a profile of the node's menu, not memory and cores of a card: HAMi picks the
profile first over all the node's GCUs, then a GCU that holds it whole. This module is that
choice and the types it works on (a GCU with its menu, a request by slices or by memory and
cores, an instance with its slices); :mod:`caldera.devices.enflame` reads and writes them.
It follows HAMi's master after PR #2877: a profile needs all its slices free, the slices an
instance takes are its ``Slots``, and a profile's cores are ``size * 100 / maxSlice`` rounded
down (``device_corebudget_test.go``: six 1-slice instances fill a 6-slice GCU).

HAMi's ``Fit`` also refuses cores outside 0-100 (``"core limit out of range"``); no request
:func:`caldera.devices.enflame.container_request` reads can carry them, so that guard is left
out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    policy_words,
    uuid_refusal,
)
from caldera.devices.model import UNSET_PERCENTAGE, Card, CardRequest, Grant

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64",
    "MODE_BY_SPEC",
    "MODE_DIRECT",
    "VENDOR",
    "DrsCard",
    "DrsGrant",
    "DrsRequest",
    "Profile",
    "add_usage",
    "atoi",
    "clamp32",
    "collect_profiles",
    "drs_request",
    "drs_walk",
    "int32",
    "memory_gb",
    "parse_profile",
    "select_profile",
    "slots_of",
]

VENDOR = "Enflame"
"""``EnflameVGCUDevice`` and ``EnflameVGCUCommonWord``."""
MODE_DIRECT, MODE_BY_SPEC = 0, -1
"""``enflameRequestModeDirect`` / ``BySpec``, carried in HAMi's ``MemPercentagereq``."""

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64 = range(-(2**63), 2**63)
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def int32(value: int) -> int:
    """Go's ``int32(v)``: the low 32 bits, signed."""
    return (value + 2**31) % 2**32 - 2**31


def clamp32(value: int) -> int:
    """``clampToInt32``."""
    return max(INT32_MIN, min(value, INT32_MAX))


def atoi(text: str) -> int | None:
    """Go's ``strconv.Atoi`` (None: an error)."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if value in INT64 else None


@dataclass(frozen=True, slots=True)
class DrsCard(Card):
    """A GCU with what HAMi keeps in its ``CustomInfo``."""

    minor: str = ""
    profiles: tuple[tuple[str, str], ...] = ()
    """(profile name, profile id) of the node's menu, as registered."""
    max_slice: int = 0
    """The largest profile's slices (``maxSlice``; 0: worked out from ``profiles``)."""


def parse_profile(name: str) -> tuple[int, int]:
    """``parseProfile``: (slices, GiB) of ``<n>g.<m>gb``; (0, 0) when the slices cannot be
    read, (n, 0) when the memory cannot."""
    parts = name.strip().lower().split(".")
    if len(parts) < 2:
        return 0, 0
    size = atoi(parts[0].strip().removesuffix("g"))
    if size is None:
        return 0, 0
    memory = atoi(parts[1].strip().removesuffix("gb"))
    return (size, 0) if memory is None else (size, memory)


@dataclass(frozen=True, slots=True)
class DrsRequest(CardRequest):
    """HAMi's ``ContainerDeviceRequest`` for a DRS profile. The fields of :class:`CardRequest`
    are what the arrays' screen (HAMi's NVIDIA checks) sees: one GCU, no memory and 1 % of its
    compute, which every profile takes at least; the profile is for the walk alone."""

    memory: int
    """``Memreq``: the slices (direct) or the memory, MiB or GiB (by spec)."""
    mode: int
    """``MemPercentagereq``: :data:`MODE_DIRECT` or :data:`MODE_BY_SPEC`."""
    cores: int
    """``Coresreq``: percent of the GCU (by spec; 0 for a direct request)."""


def drs_request(memory: int, mode: int = MODE_DIRECT, cores: int = 0) -> DrsRequest:
    return DrsRequest(VENDOR, 1, 0, UNSET_PERCENTAGE, 1, memory, mode, cores)


# -- the profile (selectProfileByRequest) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Profile:
    """``drsProfileCandidate``."""

    name: str
    id: str
    size: int
    memory_gb: int
    core_percent: int


def _menu(card: Card) -> tuple[tuple[str, str], ...]:
    return card.profiles if isinstance(card, DrsCard) else ()


def collect_profiles(cards: Sequence[Card]) -> list[Profile]:
    """``collectDRSProfiles``: every GCU's profiles by name (the last GCU naming one wins),
    cores ``size * 100 / maxSlice`` rounded down, smallest first (by slices, then memory; the
    name breaks what Go's sort leaves to chance)."""
    max_slice = max((c.max_slice for c in cards if isinstance(c, DrsCard)), default=0)
    if max_slice <= 0:
        sizes = (parse_profile(name)[0] for c in cards for name, _ in _menu(c))
        max_slice = max(sizes, default=0)
    if max_slice <= 0:
        return []
    seen: dict[str, Profile] = {}
    for card in cards:
        for name, profile_id in _menu(card):
            size, memory = parse_profile(name)
            if size > 0 and memory > 0:
                seen[name] = Profile(name, profile_id, size, memory, size * 100 // max_slice)
    return sorted(seen.values(), key=lambda p: (p.size, p.memory_gb, p.name))


def memory_gb(raw: int, max_profile_gb: int) -> int:
    """``normalizeMemoryRequestToGB``: a value above twice the largest profile's GiB is MiB
    (rounded up to GiB)."""
    if raw <= 0:
        return 0
    if max_profile_gb <= 0:
        return raw
    if raw > max_profile_gb * 2:
        return -(-raw // 1024)
    return raw


def select_profile(cards: Sequence[Card], request: DrsRequest) -> Profile | None:
    """``selectProfileByRequest``: the profile of exactly the slices asked (direct), or the
    smallest holding the memory and cores asked (by spec); None: no such profile."""
    candidates = collect_profiles(cards)
    if not candidates:
        return None
    if request.mode == MODE_DIRECT:
        return next((c for c in candidates if c.size == request.memory), None)
    want_gb = memory_gb(request.memory, candidates[-1].memory_gb)
    for c in candidates:
        if want_gb > 0 and c.memory_gb < want_gb:
            continue
        if request.cores > 0 and c.core_percent < request.cores:
            continue
        return c
    return None


def _bounded(profile: Profile) -> bool:
    """``Fit``'s guards before converting the profile to int32 (else ``ModeNotFit``)."""
    return (
        0 < profile.size <= INT32_MAX
        and 0 < profile.memory_gb <= INT32_MAX // 1024
        and profile.core_percent <= INT32_MAX
    )


# -- the walk (Fit) and the usage (AddResourceUsage) -------------------------------------------


@dataclass(frozen=True, slots=True)
class DrsGrant(Grant):
    """A DRS instance: the share of its GCU with what HAMi keeps of it (``Slots`` and the
    ``CustomInfo`` that ``PatchAnnotations`` reads)."""

    profile_name: str = ""
    profile_id: str = ""
    minor: str = ""
    index: str = ""
    slots: int = 0
    """``Slots``: the slices the instance takes (0: not known, counts one)."""

    @property
    def slots_taken(self) -> int:
        """``AddResourceUsage`` counts the instance's slices (``sliceCount``)."""
        return slots_of(self)


def slots_of(grant: Grant) -> int:
    """``sliceCount``: the slices a share takes, one when not known."""
    return grant.slots if isinstance(grant, DrsGrant) and grant.slots > 0 else 1


def add_usage(use: CardUse, grant: Grant) -> None:
    """``AddResourceUsage``: the instance's slices (clamped to int32), memory and cores; the
    device seam's usage (``fit._take``, ``fit.pod_usage``) counts the same through
    :attr:`DrsGrant.slots_taken`."""
    use.used = clamp32(use.used + slots_of(grant))
    use.usedcores += grant.cores
    use.usedmem += grant.memory


def _as_drs(request: CardRequest) -> DrsRequest:
    if not isinstance(request, DrsRequest):
        raise TypeError(f"not an Enflame DRS request: {request!r}")
    return request


def drs_walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``Fit`` for one container: the profile, then the first GCU from the end of HAMi's card
    order that holds it whole, or why each GCU said no."""
    del vendor, given  # one vendor word; no quota
    reasons: Counter[str] = Counter()
    profile = select_profile(cards, _as_drs(request))
    if profile is None or not _bounded(profile):
        reasons["ModeNotFit"] += 1
        return None, reasons, None
    memory, cores, slices = profile.memory_gb * 1024, profile.core_percent, profile.size
    mutex = "mutex" in policy_words(opts.gpu_policy)
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if request.vendor != VENDOR:  # checkType
            reasons["CardTypeMismatch"] += 1
            continue
        refused = uuid_refusal(card, opts)
        if refused is None:
            refused = _refusal(card, use, slices, memory, cores, mutex)
        if refused is not None:
            reasons[refused] += 1
            continue
        minor = card.minor if isinstance(card, DrsCard) else ""
        index = str(card.index) if isinstance(card, DrsCard) else ""
        grant = DrsGrant(
            card.id,
            VENDOR,
            memory,
            cores,
            profile_name=profile.name,
            profile_id=profile.id,
            minor=minor,
            index=index,
            slots=slices,
        )
        return [grant], reasons, None
    return None, reasons, None


def _refusal(
    card: Card, use: CardUse, slices: int, memory: int, cores: int, mutex: bool
) -> str | None:
    """``Fit``'s checks of one GCU against the profile, in HAMi's order."""
    if card.count - use.used < slices:  # the whole profile has to fit, not one slice
        return "CardTimeSlicingExhausted"
    if mutex and use.used > 0:
        return "ExclusiveDeviceAllocateConflict"
    if card.devmem - use.usedmem < memory:
        return "CardInsufficientMemory"
    if card.devcore > 0 and card.devcore - use.usedcores < cores:
        return "CardInsufficientCore"
    return None
