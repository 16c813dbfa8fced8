"""The numpy pipeline against a literal reading of Volcano's Go code: random clusters and
chains through ``ShardingManager.CalculateShardAssignments`` (``sharding_manager.go``:
``runPipeline``, ``dropAssigned``, ``calculateShardAssignmentsBatched``) written node by node, as
``sharding_manager_pipeline_test.go`` and ``sharding_performance_test.go`` exercise it."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from caldera.sharding.assign import calculate_assignments, node_table
from caldera.sharding.assign_config import SchedulerConfig, parse_sharding_config
from caldera.sharding.assign_policies import (
    WARMUP_LABEL,
    AllocationRate,
    NodeLimit,
    Warmup,
)


def reference(
    configs: Sequence[SchedulerConfig],
    labels: Mapping[str, Mapping[str, str]],
    util: Mapping[str, float],
) -> dict[str, tuple[str, ...]]:
    """``CalculateShardAssignments`` node by node and batch by batch, as the Go code reads."""
    names = sorted(labels)
    chains = {c.name: c.policies for c in configs}
    size = 50 if len(names) > 50 else max(len(names), 1)
    out: dict[str, list[str]] = {c.name: [] for c in configs}
    for start in range(0, max(len(names), 1), size):
        assigned: set[str] = set()  # per batch, as each batch is a CalculateShardAssignments
        results: dict[str, list[str]] = {}
        for config in configs:
            kept, score = [], {}
            for name in names[start : start + size]:
                column = np.array([util.get(name, np.nan)])
                if name in assigned or not all(
                    r.policy.filter(column)[0]
                    for r in chains[config.name]
                    if isinstance(r.policy, AllocationRate)
                ):
                    continue
                kept.append(name)
                score[name] = 0.0
                for ref in chains[config.name]:
                    if isinstance(ref.policy, AllocationRate):
                        score[name] += ref.weight * float(ref.policy.score(column)[0])
                    elif isinstance(ref.policy, Warmup):
                        score[name] += ref.weight * float(ref.policy.score([labels[name]])[0])
            kept.sort(key=lambda n: -score[n])  # stable, as sort.SliceStable
            for ref in chains[config.name]:
                if isinstance(ref.policy, NodeLimit) and ref.policy.max_nodes > 0:
                    kept = kept[: ref.policy.max_nodes]
            assigned.update(kept)
            results[config.name] = kept
        for name, kept in results.items():
            out[name] += kept
    return {name: tuple(nodes) for name, nodes in out.items()}


@pytest.mark.parametrize("seed", range(12))
def test_vectorised_pipeline_matches_a_node_by_node_reading(seed: int) -> None:
    """Random clusters (up to 180 nodes, some without metrics, some warm) and chains: the numpy
    pipeline gives what a literal reading of ``runPipeline`` and the batches gives."""
    rng = random.Random(seed)
    count = rng.choice([0, 7, 50, 51, 120, 180])
    names = [f"node-{rng.randrange(10**6):06d}-{i}" for i in range(count)]
    labels = {n: ({WARMUP_LABEL: "true"} if rng.random() < 0.3 else {}) for n in names}
    util = {n: round(rng.random(), rng.choice([1, 2, 3])) for n in names if rng.random() < 0.9}
    weights, caps = (rng.randint(1, 3), rng.randint(1, 3)), (rng.randint(0, 30), rng.randint(0, 40))
    configs = parse_sharding_config(
        f"""
schedulerConfigs:
  - name: a
    policies:
      - name: allocation-rate
        weight: {weights[0]}
        arguments: {{minCPUUtil: 0.5, maxCPUUtil: 1.0}}
      - {{name: warmup, weight: {weights[1]}}}
      - {{name: node-limit, arguments: {{maxNodes: {caps[0]}}}}}
  - {{name: b, cpuUtilizationMax: 0.7, preferWarmupNodes: true, maxNodes: {caps[1]}}}
  - {{name: c, policies: [{{name: warmup}}, {{name: node-limit, arguments: {{maxNodes: 5}}}}]}}
"""
    ).scheduler_configs
    result = calculate_assignments(configs, node_table(labels, util))
    assert {name: a.ranked for name, a in result.items()} == reference(configs, labels, util)
