"""NVIDIA MIG the HAMi way (HAMi's ``pkg/device/nvidia``: ``mig_topology.go``,
``mig_allocations.go`` and the MIG parts of ``device.go``).

A card registered in ``mig`` mode lists the MIG profiles NVML reports for it, each with the
placements (start slice, size) an instance of it may take. A container asking for memory on such
a card gets an instance of the smallest profile that holds the memory and has a placement
overlapping no instance on the card (``selectMigCandidate``), and is charged that profile's memory
and compute (``AddResourceUsage``). The instances the running pods hold are read back from
``hami.io/vgpu-mig-allocations`` (``DecodeMigAllocations``), which the scheduler writes at bind
for HAMi's device plugin to create them (``EncodeMigAllocations``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from caldera.devices.model import Card, Grant, MigProfile, RegistrationError

__all__ = [
    "ALLOCATIONS_ANNOTATION",
    "Placement",
    "decode_allocations",
    "encode_allocations",
    "place",
    "profiles_of",
    "select",
]

ALLOCATIONS_ANNOTATION = "hami.io/vgpu-mig-allocations"
Placement = tuple[int, int]
"""(start slice, size) of one MIG instance on its card."""


def _keys(obj: object) -> dict[str, Any]:
    """A JSON object's fields by lower-cased key, as Go's ``encoding/json`` matches them; ``{}``
    for anything that is not an object."""
    return {str(k).lower(): v for k, v in obj.items()} if isinstance(obj, dict) else {}


def profiles_of(card: Card, fields: Mapping[str, object]) -> Card:
    """The card with its ``migProfiles`` (Go's JSON keys, matched case-insensitively)."""
    raw = fields.get("migprofiles")
    if raw is None:
        return card
    if not isinstance(raw, list):
        raise RegistrationError(f"{card.id}: migProfiles: expected a list")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise RegistrationError(f"{card.id}: migProfiles[{i}]: expected an object")
        keys = _keys(item)
        name = keys.get("name", "")
        numbers = [keys.get(k, 0) for k in ("memorymb", "core", "slicecount")]
        places = keys.get("placements") or []
        if not isinstance(name, str) or not all(_is_int(n) for n in numbers):
            raise RegistrationError(f"{card.id}: migProfiles[{i}]: bad name or number")
        if not isinstance(places, list):
            raise RegistrationError(f"{card.id}: migProfiles[{i}].placements: expected a list")
        placements = []
        for p in places:
            pk = _keys(p)
            start, size = pk.get("start", 0), pk.get("size", 0)
            if not _is_int(start) or not _is_int(size):
                raise RegistrationError(f"{card.id}: migProfiles[{i}].placements: bad placement")
            placements.append((int(start), int(size)))
        memory, core, slices = (int(n) for n in numbers)
        out.append(MigProfile(name, memory, core, slices, tuple(placements)))
    return dataclasses.replace(card, mig_profiles=tuple(out))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _overlap(a: Placement, b: Placement) -> bool:
    """``migPlacementsOverlap``."""
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def _ordered(profile: str, placements: Sequence[Placement]) -> list[Placement]:
    """``orderedMigPlacements``: 1g and 3g instances from the high end, the others from the
    low end (stable)."""
    high = profile.startswith(("1g.", "3g."))
    return sorted(placements, key=lambda p: -p[0] if high else p[0])


def place(profile: MigProfile, occupied: Sequence[Placement]) -> Placement | None:
    """``selectMigPlacement``: the first of the profile's placements, in its order, that
    overlaps none of ``occupied``."""
    for candidate in _ordered(profile.name, profile.placements):
        if not any(_overlap(candidate, taken) for taken in occupied):
            return candidate
    return None


def select(
    profiles: Sequence[MigProfile], occupied: Sequence[Placement], memory: int
) -> tuple[MigProfile, Placement] | None:
    """``selectMigCandidate``: the smallest profile (by memory, then slices) holding ``memory``
    MiB that has a free placement, and that placement."""
    for profile in sorted(profiles, key=lambda p: (p.memory, p.slices)):
        if profile.memory >= memory:
            found = place(profile, occupied)
            if found is not None:
                return profile, found
    return None


def encode_allocations(containers: Sequence[Sequence[Grant]]) -> str:
    """``EncodeMigAllocations``: every MIG instance of the pod by container and device index
    ("" when the pod has none)."""
    out = [
        {
            "containerIndex": c,
            "deviceIndex": d,
            "gpuUUID": g.uuid,
            "profile": g.mig[0],
            "placement": {"start": g.mig[1], "size": g.mig[2]},
        }
        for c, grants in enumerate(containers)
        for d, g in enumerate(grants)
        if g.mig is not None
    ]
    return json.dumps(out, separators=(",", ":")) if out else ""


def decode_allocations(text: str) -> dict[str, list[Placement]]:
    """``DecodeMigAllocations``: per GPU UUID the placements a pod's instances hold; an
    incomplete or duplicated entry makes the whole annotation unreadable (ValueError)."""
    items = json.loads(text) if text else []
    if not isinstance(items, list):
        raise ValueError("expected a JSON array of MIG allocations")  # noqa: TRY004
    out: dict[str, list[Placement]] = {}
    seen: set[tuple[int, int]] = set()
    for i, item in enumerate(items):
        keys = _keys(item)
        uuid, profile = keys.get("gpuuuid", ""), keys.get("profile", "")
        place = _keys(keys.get("placement"))
        where = (keys.get("containerindex", -1), keys.get("deviceindex", -1))
        if (
            not isinstance(uuid, str)
            or not uuid
            or not isinstance(profile, str)
            or not profile
            or not all(_is_int(w) for w in where)
            or not _is_int(place.get("size", 0))
            or not place.get("size")
            or not _is_int(place.get("start", 0))
        ):
            raise ValueError(f"MIG allocation {i} is incomplete")
        runtime = [bool(keys.get("miguuid")), keys.get("gpuinstanceid") is not None]
        runtime.append(keys.get("computeinstanceid") is not None)
        if sum(runtime) not in (0, 3):
            raise ValueError(f"MIG allocation {i} has partial runtime identity")
        if where in seen:
            raise ValueError(f"duplicate MIG allocation for container {where[0]} device {where[1]}")
        seen.add(where)
        out.setdefault(uuid, []).append((int(place.get("start", 0)), int(place["size"])))
    return out
