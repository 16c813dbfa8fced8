"""MetaLink zones of MetaX sGPU cards: which whole cards to give, and how well a choice keeps the
node's zones whole (HAMi v2.10.0 ``pkg/device/metax/score.go`` and ``prioritizeExclusiveDevices``,
``scoreExclusiveDevices`` of ``sdevice.go``).

Cards in one MetaLink zone (``linkZone`` > 0) talk directly; zone 0 means no MetaLink. A
multi-card pod taking whole cards should get them from one zone, and the node it goes to should
lose as few links of its still idle cards as possible.

Go iterates a map of zones and sorts them by size with an unstable sort, so equal zones come in
any order there; here they come in the order the walk met them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from caldera.devices.model import Card

__all__ = [
    "DIRECT_LINK_SCORE",
    "LinkDevice",
    "link_score",
    "link_zones",
    "pair_score",
    "prioritize_exclusive",
    "score_exclusive",
]

DIRECT_LINK_SCORE = 10
"""``DirectLinkScore``: two cards of one MetaLink zone."""


class LinkDevice(NamedTuple):
    uuid: str
    link_zone: int


def link_zones(cards: Sequence[Card]) -> dict[str, int]:
    """Each card's MetaLink zone (0 for a card that registers none)."""
    return {c.id: int(getattr(c, "link_zone", 0)) for c in cards}


def pair_score(a: LinkDevice, b: LinkDevice) -> int:
    """``LinkDevice.score``: 10 for two distinct cards of one zone, else 0."""
    if a.uuid == b.uuid or a.link_zone == 0 or b.link_zone == 0:
        return 0
    return DIRECT_LINK_SCORE if a.link_zone == b.link_zone else 0


def link_score(devices: Sequence[LinkDevice]) -> int:
    """``LinkDevices.Score``: the pair scores summed over every pair."""
    return sum(
        pair_score(a, devices[j]) for i, a in enumerate(devices) for j in range(i + 1, len(devices))
    )


def prioritize_exclusive(candidates: Sequence[LinkDevice], require: int) -> list[LinkDevice]:
    """``prioritizeExclusiveDevices``: the first ``require`` cards of the smallest zone that holds
    them all; else zones from the smallest up, card by card; then cards with no MetaLink."""
    if len(candidates) <= require:
        return list(candidates)
    zones: dict[int, list[LinkDevice]] = {}
    for device in candidates:
        zones.setdefault(device.link_zone, []).append(device)
    linked = sorted((group for zone, group in zones.items() if zone > 0), key=len)
    unlinked = [d for zone, group in zones.items() if zone <= 0 for d in group]
    for group in linked:
        if len(group) >= require:
            return group[:require]
    chosen: list[LinkDevice] = []
    for device in [d for group in linked for d in group] + unlinked:
        chosen.append(device)
        if len(chosen) >= require:
            return chosen
    return list(candidates[:require])


def score_exclusive(taken: Sequence[LinkDevice], idle: Sequence[LinkDevice]) -> int:
    """``scoreExclusiveDevices``: ten times the links among the whole cards taken, less the
    links the node's idle cards lose (those between a taken and a remaining idle card)."""
    chosen = {d.uuid for d in taken}
    rest = [d for d in idle if d.uuid not in chosen]
    taken_score = link_score(taken)
    loss = link_score(idle) - taken_score - link_score(rest)
    return 10 * taken_score - loss
