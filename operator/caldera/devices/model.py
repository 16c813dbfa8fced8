"""The vendor-neutral device types: a registered card, a container's request, a granted share.

A vendor module turns its node annotation into :class:`Card` objects and its container resources
into :class:`CardRequest` objects; everything after that (usage, fit, score, the allocation
string) works on these types alone, which is what makes another vendor one new module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

__all__ = [
    "UNSET_PERCENTAGE",
    "Card",
    "CardRequest",
    "DeviceDefaults",
    "Grant",
    "MigProfile",
    "NodeView",
    "RegistrationError",
]

UNSET_PERCENTAGE = 101
"""HAMi's "no memory percentage given" (a real percentage is 0-100)."""


class RegistrationError(ValueError):
    """A node's registration text cannot be read; the message says where it goes wrong."""


class NodeView(NamedTuple):
    """What a vendor may read of a node to list its cards: most read one annotation, some
    (Cambricon, MetaX, Moore Threads, Enflame, Kunlunxin, AWS Neuron) the node's capacity,
    and name their cards after the node."""

    name: str
    annotations: Mapping[str, str]
    capacity: Mapping[str, float] = MappingProxyType({})
    """``status.capacity``, at least the resources the vendors read there."""
    labels: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MigProfile:
    """A MIG profile NVML reports for a card in MIG mode (HAMi's ``MigProfile``)."""

    name: str
    """e.g. ``1g.10gb``."""
    memory: int
    core: int
    slices: int
    placements: tuple[tuple[int, int], ...]
    """(start, size) where an instance of this profile may sit."""


@dataclass(frozen=True, slots=True)
class Card:
    """One physical device as its node registers it."""

    id: str
    """The device UUID (``GPU-…``)."""
    count: int
    """Sharing slots: at most this many containers on the card at once."""
    devmem: int
    """Memory in MiB (already scaled by the device plugin)."""
    devcore: int
    """Compute in percent of the card (100 = all of it)."""
    type: str
    """The model, e.g. ``NVIDIA-Tesla T4``."""
    health: bool
    index: int = 0
    numa: int = 0
    mode: str = "hami-core"
    network: int | None = None
    """The network the card is wired to (Ascend 910's ``custominfo.NetworkID``), if known."""
    mig_profiles: tuple[MigProfile, ...] = ()
    """The MIG profiles of a card in ``mig`` mode."""


@dataclass(frozen=True, slots=True)
class CardRequest:
    """What one container asks of each of ``nums`` distinct cards."""

    vendor: str
    """The vendor word written in the allocation string (``NVIDIA``)."""
    nums: int
    memreq: int
    """MiB per card, already multiplied by the memory factor; 0 when given as a percentage."""
    mem_percentage: int
    """Percent of each candidate card's memory, or :data:`UNSET_PERCENTAGE`."""
    coresreq: int
    """Percent of each card's compute (clamped to 100 when fitted)."""

    def memory_on(self, card: Card) -> int:
        """The MiB this request takes on ``card`` (a percentage is of that card's memory)."""
        if self.memreq > 0:
            return self.memreq
        if self.mem_percentage != UNSET_PERCENTAGE:
            return card.devmem * self.mem_percentage // 100
        return 0


@dataclass(frozen=True, slots=True)
class Grant:
    """A share of one card given to one container."""

    uuid: str
    vendor: str
    memory: int
    cores: int
    mig: tuple[str, int, int] | None = None
    """The MIG instance the share is: (profile, start slice, size)."""

    @property
    def slots_taken(self) -> int:
        """The card's sharing slots this share takes: one (a vendor's grant may take more, as
        an Enflame DRS instance takes its slices)."""
        return 1


@dataclass(frozen=True, slots=True)
class DeviceDefaults:
    """The knobs HAMi's device configmap sets (and Volcano's deviceshare has none of)."""

    default_memory: int = 0
    """MiB given to a container that asks for a card but names no memory (0: the whole card)."""
    default_cores: int = 0
    memory_factor: int = 1
    """Requested gpumem is multiplied by this (HAMi's memoryFactor)."""
