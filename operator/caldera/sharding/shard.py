"""A scheduler's NodeShard: the nodes it places pods on when a sharding controller splits the
cluster (``--scheduler-sharding-mode hard`` or ``soft``, ``--scheduler-sharding-name``).

As Volcano's scheduler cache does it (``pkg/scheduler/cache/shard_coordinator.go``):

- the nodes in use are the NodeShard's ``spec.nodesDesired`` less every node another NodeShard's
  ``status.nodesInUse`` still holds (``getAvailableNodesFromShard``): a node moves only once the
  scheduler that had it lets it go, so two schedulers never place on one node at once;
- the status written back (``generateNodeShardWithStatus``): ``nodesInUse``, ``nodesToRemove``
  (in use, no longer desired) and ``nodesToAdd`` (desired, not in use yet), only when one of them
  changed;
- **hard** mode refuses every other node, with the reason ``node isn't in scheduler node shard``
  (``PredicateNodes``); **soft** mode takes the shard's nodes first and the others only when none
  of the shard's fits (``prioritizeNodes``: idle in the shard, idle elsewhere, then the same for
  future idle resources).

Without its NodeShard the scheduler has no node in its shard (Volcano logs "Sharding is enabled
but no shard is defined for this scheduler"): hard mode places nothing, soft mode places as if
every node were another shard's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.models.shard import NodeShard

__all__ = [
    "HARD",
    "MODES",
    "NONE",
    "NOT_IN_SHARD",
    "SOFT",
    "ShardStatus",
    "ShardView",
    "hard_filter",
    "nodes_in_use",
    "shard_status",
    "shard_view",
    "shared_node",
]

NONE, HARD, SOFT = "none", "hard", "soft"
MODES = (NONE, HARD, SOFT)
"""``--scheduler-sharding-mode``'s values (``NoneShardingMode``...)."""
NOT_IN_SHARD = "node isn't in scheduler node shard"
"""The predicate's reason in hard mode (``PredicateNodes``)."""


def nodes_in_use(name: str, shards: Mapping[str, NodeShard]) -> frozenset[str]:
    """``getAvailableNodesFromShard``: NodeShard ``name``'s desired nodes no other NodeShard
    says it still uses (none without the NodeShard)."""
    mine = shards.get(name)
    if mine is None:
        return frozenset()
    held = {
        node
        for other, shard in shards.items()
        if other != name
        for node in shard.status.nodes_in_use
    }
    return frozenset(mine.spec.nodes_desired) - held


@dataclass(frozen=True, slots=True)
class ShardStatus:
    """The status a scheduler writes on its NodeShard, lists sorted."""

    name: str
    nodes_in_use: tuple[str, ...]
    nodes_to_remove: tuple[str, ...]
    nodes_to_add: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ShardView:
    """The session's shard: its mode, the node rows in it, and the status to write."""

    mode: str
    rows: npt.NDArray[np.bool_]
    """Per node row of the session's table, whether the node is in the shard."""
    status: ShardStatus | None
    """What to write on the NodeShard (None: nothing changed, or there is no NodeShard)."""

    @property
    def hard(self) -> bool:
        return self.mode == HARD

    @property
    def soft(self) -> bool:
        return self.mode == SOFT


def shard_status(shard: NodeShard, in_use: frozenset[str]) -> ShardStatus | None:
    """``generateNodeShardWithStatus``: the status of ``shard`` when the scheduler uses
    ``in_use``; None when it already says so."""
    desired = frozenset(shard.spec.nodes_desired)
    new = ShardStatus(
        shard.metadata.name,
        tuple(sorted(in_use)),
        tuple(sorted(in_use - desired)),
        tuple(sorted(desired - in_use)),
    )
    old = shard.status
    same = (
        set(old.nodes_in_use) == set(new.nodes_in_use)
        and set(old.nodes_to_remove) == set(new.nodes_to_remove)
        and set(old.nodes_to_add) == set(new.nodes_to_add)
    )
    return None if same else new


def shard_view(
    mode: str, name: str, shards: Mapping[str, NodeShard], rows: Sequence[str]
) -> ShardView | None:
    """The shard of the scheduler ``name`` in ``mode`` over the node rows named ``rows``
    (None in mode ``none``), with the status to write (``RefreshNodeShards``)."""
    if mode == NONE:
        return None
    in_use = nodes_in_use(name, shards)
    mask = np.fromiter((n in in_use for n in rows), dtype=np.bool_, count=len(rows))
    mine = shards.get(name)
    return ShardView(mode, mask, None if mine is None else shard_status(mine, in_use))


def hard_filter(
    view: ShardView | None,
) -> Callable[[object], list[tuple[str, npt.NDArray[np.bool_]]]] | None:
    """In hard mode, the session's node filter refusing every node outside the shard
    (``PredicateNodes``), ahead of the plugins'; None in the other modes."""
    if view is None or not view.hard:
        return None
    outside = ~view.rows
    return lambda task: [(NOT_IN_SHARD, outside)]


def shared_node(view: ShardView | None, row: int) -> bool:
    """Soft sharding placed on node ``row`` outside the shard: another scheduler's node, to be
    checked with the API server before binding."""
    return view is not None and view.soft and not bool(view.rows[row])
