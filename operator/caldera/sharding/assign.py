"""Which nodes go to which scheduler's NodeShard, as Volcano's sharding controller decides.

The pure core of ``pkg/controllers/sharding``: given the nodes, their CPU utilisation
(:mod:`~caldera.sharding.assign_metrics`) and the configuration
(:mod:`~caldera.sharding.assign_config`), each scheduler's desired nodes; given the NodeShards
that exist, which to create, which to rewrite and which to delete. The operator lists, watches and
writes; nothing here does I/O.

``ShardingManager.CalculateShardAssignments`` (``sharding_manager.go``), rule for rule:

- the schedulers go in configuration order, each over the nodes no earlier one took
  (``dropAssigned``), so no node is in two shards;
- per scheduler ``runPipeline``: every ``allocation-rate`` filter must accept the node (no
  metrics: refused); the rank is ``Σ weight × score`` over ``allocation-rate`` and ``warmup``,
  highest first, ties in list order (a stable sort); ``node-limit`` keeps the first ``maxNodes``;
- more than 50 nodes are taken 50 at a time (``calculateShardAssignmentsBatched``): each batch
  is assigned on its own and the lists are joined, so ``maxNodes`` bounds each batch, not the
  shard (Volcano's behaviour, kept for compatibility; ``batch_size=0`` for one pass);
- two entries with one name share the last entry's policies and the last entry's result
  (``policyCache`` and the result map are keyed by name).

Volcano takes the nodes in its informer's list order, which Go leaves unspecified; here they go
by name, so ties, batches and every result are deterministic.

``ShardingController.applyAssignment``, ``assignmentNeedsUpdate``, ``findNodesToAddRemove``,
``createShard`` and ``cleanupStaleNodeShards`` (``sharding_controller.go``) decide the writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.models.shard import NodeShard
from caldera.sharding.assign_config import PolicyRef, SchedulerConfig, ShardingConfig
from caldera.sharding.assign_policies import AllocationRate, NodeLimit, Warmup

__all__ = [
    "BATCH_SIZE",
    "NodeTable",
    "ShardAssignment",
    "ShardWrite",
    "assignment_needs_update",
    "calculate_assignments",
    "calculate_single_assignment",
    "node_table",
    "nodes_to_add_remove",
    "shard_writes",
    "stale_shards",
]

BATCH_SIZE = 50
"""``defaultBatchSize``."""
_CHANGE_FRACTION = 10
"""``assignmentNeedsUpdate``'s threshold: a tenth of the desired nodes."""

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable:
    """The nodes the assignment runs over, sorted by name, with what the policies read."""

    names: tuple[str, ...]
    labels: tuple[Mapping[str, str], ...]
    cpu_utilization: FloatArray
    """Per node, NaN where the node has no metrics (``allocation-rate`` refuses it)."""


def node_table(
    nodes: Mapping[str, Mapping[str, str]], cpu_utilization: Mapping[str, float]
) -> NodeTable:
    """The table of ``nodes`` (name to labels: every node listed, as Volcano takes them, ready or
    not, schedulable or not) with each one's CPU utilisation (``NodeMetrics.CPUUtilization``;
    a node missing from ``cpu_utilization`` has no metrics; extra entries are ignored)."""
    names = tuple(sorted(nodes))
    util = np.fromiter(
        (cpu_utilization.get(name, np.nan) for name in names), dtype=np.float64, count=len(names)
    )
    return NodeTable(names, tuple(nodes[name] for name in names), util)


@dataclass(frozen=True, slots=True)
class ShardAssignment:
    """``ShardAssignment``: one scheduler's desired nodes."""

    name: str
    """The scheduler's name, and its NodeShard's."""
    nodes: tuple[str, ...]
    """The desired nodes, sorted by name (what to write as ``spec.nodesDesired``)."""
    ranked: tuple[str, ...]
    """The same nodes in Volcano's order: by rank within each batch, batches in turn."""


class _Scores:
    """One calculation's per-node policy columns, each computed once for all schedulers."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._warm: dict[Warmup, FloatArray] = {}

    def warmup(self, policy: Warmup, rows: IndexArray) -> FloatArray:
        column = self._warm.get(policy)
        if column is None:
            column = self._warm[policy] = policy.score(self.table.labels)
        return column[rows]


def _run_pipeline(
    policies: Sequence[PolicyRef], scores: _Scores, rows: IndexArray, batch_size: int
) -> IndexArray:
    """``runPipeline`` over the candidate ``rows`` (ascending) for each batch at once: the rows
    kept, in Volcano's order."""
    util = scores.table.cpu_utilization
    for ref in policies:
        if isinstance(ref.policy, AllocationRate):
            rows = rows[ref.policy.filter(util[rows])]
    total = np.zeros(len(rows), dtype=np.float64)
    for ref in policies:
        if isinstance(ref.policy, AllocationRate):
            total += float(ref.weight) * ref.policy.score(util[rows])
        elif isinstance(ref.policy, Warmup):
            total += float(ref.weight) * scores.warmup(ref.policy, rows)
    batch = rows // batch_size if batch_size > 0 else np.zeros(len(rows), dtype=np.intp)
    order = np.lexsort((rows, -total, batch))  # batch, then rank (stable), then list order
    ranked, batch = rows[order], batch[order]
    caps = [ref.policy.cap for ref in policies if isinstance(ref.policy, NodeLimit)]
    bounds = [cap for cap in caps if cap is not None]
    if bounds:  # each node-limit Select truncates what the previous one kept
        place = np.arange(len(ranked)) - np.searchsorted(batch, batch, side="left")
        ranked = ranked[place < min(bounds)]
    return np.asarray(ranked, dtype=np.intp)


def _schedulers(config: ShardingConfig | Sequence[SchedulerConfig]) -> Sequence[SchedulerConfig]:
    return config.scheduler_configs if isinstance(config, ShardingConfig) else config


def _assignment(name: str, table: NodeTable, rows: IndexArray) -> ShardAssignment:
    ranked = tuple(table.names[i] for i in rows)
    return ShardAssignment(name, tuple(sorted(ranked)), ranked)


def calculate_assignments(
    config: ShardingConfig | Sequence[SchedulerConfig],
    table: NodeTable,
    *,
    batch_size: int = BATCH_SIZE,
) -> dict[str, ShardAssignment]:
    """``CalculateShardAssignments``: every configured scheduler's desired nodes (an empty list
    for one that gets none: its NodeShard is still created), keyed by scheduler name."""
    schedulers = _schedulers(config)
    chains = {scheduler.name: scheduler.policies for scheduler in schedulers}  # last one wins
    scores = _Scores(table)
    taken = np.zeros(len(table.names), dtype=np.bool_)
    out: dict[str, ShardAssignment] = {}
    size = batch_size if len(table.names) > batch_size > 0 else 0
    for scheduler in schedulers:
        free = np.flatnonzero(~taken)
        rows = _run_pipeline(chains[scheduler.name], scores, free, size)
        taken[rows] = True
        out[scheduler.name] = _assignment(scheduler.name, table, rows)
    return out


def calculate_single_assignment(scheduler: SchedulerConfig, table: NodeTable) -> ShardAssignment:
    """``calculateSingleSchedulerAssignment``: one scheduler alone over every node, in one pass.

    Volcano falls back to it (``syncHandler`` → ``calculateAndApplyAssignment``) when its cached
    assignment is missing or older than five minutes, which happens after every ConfigMap reload
    (the cache is emptied) and when the sync period exceeds five minutes: it ignores the other
    schedulers' nodes, so two shards can then desire one node until the next full sync. Prefer
    :func:`calculate_assignments`."""
    rows = _run_pipeline(
        scheduler.policies, _Scores(table), np.arange(len(table.names), dtype=np.intp), 0
    )
    return _assignment(scheduler.name, table, rows)


def assignment_needs_update(current: Sequence[str], desired: Sequence[str]) -> bool:
    """``assignmentNeedsUpdate``: rewrite when the node count differs, or when at least
    ``max(1, len(desired) // 10)`` desired nodes are new. With the count unchanged, swapping
    fewer nodes than that leaves the NodeShard as it is."""
    if len(current) != len(desired):
        return True
    have = set(current)
    threshold = max(1, len(desired) // _CHANGE_FRACTION)
    return sum(node not in have for node in desired) >= threshold


def nodes_to_add_remove(
    in_use: Sequence[str], desired: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``findNodesToAddRemove``: (desired but not in use, in use but not desired), sorted."""
    have, want = set(in_use), set(desired)
    return tuple(sorted(want - have)), tuple(sorted(have - want))


@dataclass(frozen=True, slots=True)
class ShardWrite:
    """A NodeShard to create or whose ``spec.nodesDesired`` to replace (``applyAssignment``).

    The status fields are what Volcano puts in the object it sends (with ``lastUpdateTime`` now);
    the NodeShard CRD has a status subresource, so the API server keeps only the spec."""

    name: str
    create: bool
    nodes_desired: tuple[str, ...]
    """Write it even when empty: ``spec.nodesDesired`` is required (Volcano sends ``[]``)."""
    nodes_to_add: tuple[str, ...]
    nodes_to_remove: tuple[str, ...]


def shard_writes(
    assignments: Mapping[str, ShardAssignment], shards: Mapping[str, NodeShard]
) -> list[ShardWrite]:
    """``applyAssignment`` for each assignment, by name: a NodeShard that does not exist is
    created (``createShard``: every desired node to add); one that does is rewritten only when
    :func:`assignment_needs_update` says so, with the nodes to add and remove measured against
    its ``status.nodesInUse``. ``shards`` maps NodeShard names to the NodeShards that exist."""
    writes = []
    for name in sorted(assignments):
        desired = assignments[name].nodes
        shard = shards.get(name)
        if shard is None:
            writes.append(ShardWrite(name, True, desired, desired, ()))
        elif assignment_needs_update(shard.spec.nodes_desired, desired):
            add, remove = nodes_to_add_remove(shard.status.nodes_in_use, desired)
            writes.append(ShardWrite(name, False, desired, add, remove))
    return writes


def stale_shards(
    shards: Mapping[str, NodeShard], assignments: Mapping[str, ShardAssignment]
) -> tuple[str, ...]:
    """``cleanupStaleNodeShards``: the NodeShards of schedulers no longer configured, to delete
    (every NodeShard is the controller's; Volcano checks no owner or label)."""
    return tuple(sorted(name for name in shards if name not in assignments))
