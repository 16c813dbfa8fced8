"""The other pods on each card, for the vendors whose walk or score looks at them.

Most vendors judge a card by its usage alone (slots, memory, cores). MetaX's sGPU also reads who
holds it (HAMi's ``PodInfos``: each container's app class, QoS policy and cores), so an online
pod shares only with online pods and goes where the fewest run. :class:`CardHolders` works that
out per node from the pods on it (the session's placements among them: the node table's rows hold
them), when a walk asks, and keeps it until a placement on that node changes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from caldera.api.node import NodeTable
from caldera.devices.model import Grant
from caldera.devices.vendor import Vendor
from caldera.plugins.deviceshare.kept import Grants

__all__ = ["CardHolders"]

Holders = Mapping[str, Sequence[Hashable]]


class CardHolders:
    """Per (vendor, node row), the notes the vendor keeps of each container on each card."""

    __slots__ = ("_cache", "_grants", "_nodes", "_vendors")

    def __init__(self, vendors: Sequence[Vendor], nodes: NodeTable, grants: Grants) -> None:
        self._vendors = vendors
        self._nodes = nodes
        """Its rows hold the pods on each node, the session's placements among them."""
        self._grants = grants
        self._cache: dict[tuple[int, int], Holders] = {}

    def of(self, v: int, row: int) -> Holders:
        """Card UUID → what vendor ``v`` notes of each container holding it on ``row``."""
        key = (v, row)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        noted = self._vendors[v].holders
        assert noted is not None
        pods: list[tuple[Mapping[str, str], Sequence[Sequence[Grant]]]] = []
        for task in self._nodes.tasks[row].values():
            for held_v, where, containers in self._grants.get(task.uid):
                if held_v == v and where == row:
                    pods.append((task.annotations, containers))
        out = self._cache[key] = noted(pods)
        return out

    def changed(self, row: int) -> None:
        """A pod was placed on ``row`` or taken off it."""
        for key in [k for k in self._cache if k[1] == row]:
            del self._cache[key]
