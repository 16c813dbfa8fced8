"""Hierarchical dominant resource fairness (drf with ``enableHierarchy``): the queue tree's shares.

Queues name their place in the tree with Volcano's annotations ``volcano.sh/hierarchy``
(``root/eng/prod``) and ``volcano.sh/hierarchy-weights`` (``1/2/8``, one weight per level); a
queue without them sits at ``root/<name>`` with weight 1 (``root`` is added in front of a path
that lacks it, as Volcano's webhook does). Every tree node holds what its queues hold and ask
for. Two queues compare at the first level where their paths part, and only there: the node that
is not yet saturated (it asks for more than it holds) comes first, then the smaller dominant share
(of the cluster) divided by the node's weight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from caldera.api.compare import ShareMeter
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector
from caldera.models.volcano import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION

__all__ = ["HIERARCHY", "WEIGHTS", "QueueTree"]

HIERARCHY = HIERARCHY_ANNOTATION
WEIGHTS = HIERARCHY_WEIGHTS_ANNOTATION


@dataclass(slots=True)
class _Level:
    weight: float
    allocated: Vector
    request: Vector


@dataclass(slots=True)
class QueueTree:
    space: ResourceSpace
    meter: ShareMeter
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Queue → its tree path prefixes, ``root`` first (``root``, ``root/eng``, ...)."""
    levels: dict[str, _Level] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        space: ResourceSpace,
        total: Vector,
        queues: Mapping[str, Queue],
        annotations: Mapping[str, Mapping[str, str]],
    ) -> QueueTree:
        tree = cls(space, ShareMeter(space, total))
        for name in queues:
            notes = annotations.get(name, {})
            parts = [p for p in notes.get(HIERARCHY, "").split("/") if p] or [name]
            weights = [w for w in notes.get(WEIGHTS, "").split("/") if w]
            if parts[0] != "root":
                parts = ["root", *parts]
                weights = ["1", *weights]
            prefixes = tuple("/".join(parts[: i + 1]) for i in range(len(parts)))
            tree.paths[name] = prefixes
            for i, prefix in enumerate(prefixes):
                if prefix not in tree.levels:
                    try:
                        weight = float(weights[i]) if i < len(weights) else 1.0
                    except ValueError:
                        weight = 1.0
                    tree.levels[prefix] = _Level(max(weight, 1e-9), space.zeros(), space.zeros())
        return tree

    def add(self, queue: str, allocated: Vector, request: Vector) -> None:
        """Account a queue's holdings and demand along its path."""
        for prefix in self.paths.get(queue, ()):
            level = self.levels[prefix]
            level.allocated += allocated
            level.request += request

    def _level_key(self, prefix: str, moved: Mapping[str, Vector]) -> tuple[bool, float]:
        level = self.levels[prefix]
        held = level.allocated + moved.get(prefix, 0.0)
        saturated = bool(np.all((level.request <= held + 0.1)[self.space.quota]))
        return saturated, self.meter(held) / level.weight

    def compare(self, left: str, right: str, deltas: Mapping[str, Vector] | None = None) -> int:
        """-1 when queue ``left`` comes first, 1 when ``right`` does, 0 when they tie where
        their paths part; ``deltas`` (queue → change in holdings) are applied as if made."""
        moved: dict[str, Vector] = {}
        for q, delta in (deltas or {}).items():
            for prefix in self.paths.get(q, ()):
                moved[prefix] = moved.get(prefix, 0.0) + delta
        for mine, theirs in zip(self.paths.get(left, ()), self.paths.get(right, ()), strict=False):
            if mine != theirs:
                a, b = self._level_key(mine, moved), self._level_key(theirs, moved)
                return (a > b) - (a < b)
        return 0
