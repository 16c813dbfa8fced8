"""The other pods on each card, for the vendors whose walk or score looks at them.

Most vendors judge a card by its usage alone (slots, memory, cores). MetaX's sGPU also reads who
holds it (HAMi's ``PodInfos``: each container's app class, QoS policy and cores), so an online
pod shares only with online pods and goes where the fewest run. :class:`CardHolders` works that
out per node from the pods there and the session's own placements, when a walk asks, and keeps
it until a placement on that node changes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from caldera.api.task import Task
from caldera.devices.model import Grant
from caldera.devices.vendor import Vendor
from caldera.plugins.deviceshare.kept import Grants

__all__ = ["CardHolders"]

Holders = Mapping[str, Sequence[Hashable]]


class CardHolders:
    """Per (vendor, node row), the notes the vendor keeps of each container on each card."""

    __slots__ = ("_cache", "_grants", "_placed", "_tasks", "_vendors")

    def __init__(
        self, vendors: Sequence[Vendor], tasks: Sequence[Mapping[str, Task]], grants: Grants
    ) -> None:
        self._vendors = vendors
        self._tasks = tasks
        """The pods on each node row when the session opened."""
        self._grants = grants
        self._placed: dict[int, dict[str, Task]] = {}
        """The pods the session placed on each row."""
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
        for task in (*self._tasks[row].values(), *self._placed.get(row, {}).values()):
            for held_v, where, containers in self._grants.get(task.uid):
                if held_v == v and where == row:
                    pods.append((task.annotations, containers))
        out = self._cache[key] = noted(pods)
        return out

    def placed(self, task: Task, row: int, sign: int) -> None:
        """``task`` was placed on (``sign`` 1) or taken off (-1) ``row``."""
        if sign > 0:
            self._placed.setdefault(row, {})[task.uid] = task
        else:
            self._placed.get(row, {}).pop(task.uid, None)
        for key in [k for k in self._cache if k[1] == row]:
            del self._cache[key]
