"""The sharding controller's built-in policies, after the tables of
``pkg/controllers/sharding/policy/allocationrate/allocationrate_test.go``,
``policy/nodelimit/nodelimit_test.go``, ``policy/warmup/warmup_test.go`` and
``policy/registry_test.go``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from caldera.sharding.assign import NodeTable, calculate_assignments
from caldera.sharding.assign_config import PolicyRef, SchedulerConfig
from caldera.sharding.assign_policies import (
    AllocationRate,
    NodeLimit,
    Warmup,
    build_policy,
    get_int,
    round_util,
)


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        pytest.param({"minCPUUtil": 0.0, "maxCPUUtil": 0.6}, False, id="valid configuration"),
        pytest.param({"minCPUUtil": 0.7, "maxCPUUtil": 0.5}, True, id="invalid - min > max"),
        pytest.param({"minCPUUtil": -0.1, "maxCPUUtil": 0.5}, True, id="invalid - negative min"),
        pytest.param({"minCPUUtil": 0.0, "maxCPUUtil": 1.5}, True, id="invalid - max > 1"),
        pytest.param({"minCPUUtil": "0.1", "maxCPUUtil": 0.5}, False, id="GetFloat64: a string"),
    ],
)
def test_allocation_rate_policy_initialize(args: dict[str, object], refused: bool) -> None:
    """``TestAllocationRatePolicyInitialize``."""
    if refused:
        with pytest.raises(ValueError, match="invalid CPU utilization range"):
            build_policy("allocation-rate", args)
    else:
        assert isinstance(build_policy("allocation-rate", args), AllocationRate)


def test_allocation_rate_defaults_to_idle_nodes_only() -> None:
    """``Initialize`` reads both bounds into zeroed locals: without arguments the range is
    [0, 0], not ``New``'s [0, 1]."""
    assert build_policy("allocation-rate", {}) == AllocationRate(0.0, 0.0)


def rate(low: float, high: float) -> AllocationRate:
    return AllocationRate.from_arguments({"minCPUUtil": low, "maxCPUUtil": high})


@pytest.mark.parametrize(
    ("low", "high", "util", "want"),
    [
        pytest.param(
            0.3, 0.7, 0.5, True, id="TestAllocationRatePolicyFilter: in-range util passes"
        ),
        pytest.param(0.3, 0.7, 0.2, False, id="TestAllocationRatePolicyFilter: below-range"),
        pytest.param(0.3, 0.7, 0.8, False, id="TestAllocationRatePolicyFilter: above-range"),
        pytest.param(0.3, 0.7, 0.30, True, id="TestAllocationRatePolicyFilter: boundary inclusive"),
        pytest.param(
            0.0, 1.0, math.nan, False, id="TestAllocationRatePolicyFilter: missing metrics"
        ),
        pytest.param(0.0, 1.0, -1.0, False, id="TestAllocationRatePolicyFilter: negative util"),
        pytest.param(0.0, 0.49, 0.494, True, id="roundUtil: 0.494 rounds to 0.49, inside"),
        pytest.param(0.5, 1.0, 0.495, True, id="roundUtil: 0.495 rounds half up to 0.50"),
        pytest.param(0.0, 0.6, 0.6049, True, id="roundUtil: 0.6049 rounds to 0.60"),
    ],
)
def test_allocation_rate_policy_filter(low: float, high: float, util: float, want: bool) -> None:
    got = rate(low, high).filter(np.array([util]))
    assert got.tolist() == [want]


@pytest.mark.parametrize(
    ("low", "high", "util", "want"),
    [
        pytest.param(0.0, 1.0, 0.5, 0.5, id="TestAllocationRatePolicyScore: full range passes"),
        pytest.param(0.0, 1.0, 1.0, 1.0, id="TestAllocationRatePolicyScore: max maps to 1.0"),
        pytest.param(0.4, 0.6, 0.5, 0.5, id="TestAllocationRatePolicyScore: narrow range"),
        pytest.param(0.4, 0.6, 0.4, 0.0, id="TestAllocationRatePolicyScore: min maps to 0"),
        pytest.param(0.4, 0.6, 0.6, 1.0, id="TestAllocationRatePolicyScore: max maps to 1"),
        pytest.param(0.5, 0.5, 0.5, 1.0, id="TestAllocationRatePolicyScore: collapsed range"),
        pytest.param(0.4, 0.6, 0.7, 1.0, id="TestAllocationRatePolicyScore: above max clamps"),
        pytest.param(0.4, 0.6, 0.3, 0.0, id="TestAllocationRatePolicyScore: below min clamps"),
        pytest.param(0.0, 1.0, math.nan, 0.0, id="TestAllocationRatePolicyScore: missing metrics"),
        pytest.param(0.0, 1.0, -0.5, 0.0, id="TestAllocationRatePolicyScore: negative util"),
        pytest.param(0.5, 0.5, math.nan, 0.0, id="Score: collapsed range, missing metrics"),
    ],
)
def test_allocation_rate_policy_score(low: float, high: float, util: float, want: float) -> None:
    got = rate(low, high).score(np.array([util]))
    assert got.tolist() == pytest.approx([want], abs=1e-12)


def test_round_util_takes_halves_away_from_zero() -> None:
    """``roundUtil`` is Go's ``math.Round``: 0.125 → 0.13 and 0.005 → 0.01, where numpy's
    ``round`` gives 0.12 and 0.0."""
    got = round_util(np.array([0.125, 0.135, 0.005, 0.0049, 1.0]))
    assert got.tolist() == [0.13, 0.14, 0.01, 0.0, 1.0]


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        pytest.param({"minNodes": 2, "maxNodes": 10}, False, id="TestNodeLimitInitialize: valid"),
        pytest.param(
            {"minNodes": 2.0, "maxNodes": 10.0},
            False,
            id="TestNodeLimitInitialize: valid bounds from YAML decoded numbers",
        ),
        pytest.param({"maxNodes": 5}, False, id="TestNodeLimitInitialize: max only"),
        pytest.param({}, False, id="TestNodeLimitInitialize: no bounds (no-op selector)"),
        pytest.param({"minNodes": -1, "maxNodes": 5}, True, id="TestNodeLimitInitialize: negative"),
        pytest.param({"minNodes": 10, "maxNodes": 5}, True, id="TestNodeLimitInitialize: max<min"),
        pytest.param({"minNodes": 10, "maxNodes": 0}, False, id="Initialize: max 0 is unbounded"),
    ],
)
def test_node_limit_initialize(args: dict[str, object], refused: bool) -> None:
    if refused:
        with pytest.raises(ValueError, match="invalid"):
            NodeLimit.from_arguments(args)
    else:
        assert isinstance(NodeLimit.from_arguments(args), NodeLimit)


def test_get_int_truncates_and_ignores_what_it_cannot_read() -> None:
    """``GetInt``: float64 truncated toward zero, a bool or string ignored."""
    assert get_int({"k": 2.9}, "k", 7) == 2
    assert get_int({"k": -2.9}, "k", 7) == -2
    assert get_int({"k": True}, "k", 7) == 7
    assert get_int({"k": "3"}, "k", 7) == 7


def select(args: dict[str, object], names: list[str]) -> list[str]:
    """Runs a node-limit-only chain (no filter, no scorer: list order) over ``names``."""
    limit = NodeLimit.from_arguments(args)
    scheduler = SchedulerConfig("test", "", (PolicyRef("node-limit", 1, args, limit),))
    table = NodeTable(tuple(names), tuple({} for _ in names), np.zeros(len(names)))
    return list(calculate_assignments([scheduler], table)["test"].ranked)


@pytest.mark.parametrize(
    ("args", "count", "keep"),
    [
        pytest.param({"maxNodes": 5}, 3, 3, id="TestNodeLimitSelect: len < max keeps all"),
        pytest.param({"maxNodes": 3}, 3, 3, id="TestNodeLimitSelect: len == max keeps all"),
        pytest.param({"maxNodes": 2}, 4, 2, id="TestNodeLimitSelect: len > max truncates"),
        pytest.param({"maxNodes": 2.0}, 4, 2, id="TestNodeLimitSelect: YAML decoded max"),
        pytest.param({}, 3, 3, id="TestNodeLimitSelect: max=0 means no upper bound"),
        pytest.param({"minNodes": 5, "maxNodes": 10}, 2, 2, id="TestNodeLimitSelect: no padding"),
        pytest.param({"maxNodes": 5}, 0, 0, id="TestNodeLimitSelect: empty input stays empty"),
    ],
)
def test_node_limit_select(args: dict[str, object], count: int, keep: int) -> None:
    assert len(select(args, [chr(ord("a") + i) for i in range(count)])) == keep


def test_node_limit_truncates_prefix() -> None:
    """``TestNodeLimitTruncatesPrefix``."""
    assert select({"maxNodes": 3}, ["a", "b", "c", "d", "e"]) == ["a", "b", "c"]


def test_warmup_policy_initialize() -> None:
    """``TestWarmupPolicyInitialize``: valid configuration; empty warmup label rejected."""
    assert Warmup.from_arguments(
        {"warmupLabel": "node.volcano.sh/warmup", "warmupLabelValue": "true"}
    ) == Warmup("node.volcano.sh/warmup", "true")
    with pytest.raises(ValueError, match="warmupLabel cannot be empty"):
        Warmup.from_arguments({"warmupLabel": ""})


@pytest.mark.parametrize(
    ("args", "labels", "want"),
    [
        pytest.param({}, {"node.volcano.sh/warmup": "true"}, 1.0, id="default label, present"),
        pytest.param({}, {}, 0.0, id="TestWarmupPolicyScore: default label, absent"),
        pytest.param({}, {"node.volcano.sh/warmup": "false"}, 0.0, id="default label, wrong value"),
        pytest.param(
            {"warmupLabel": "node.example.com/pool", "warmupLabelValue": "warm"},
            {"node.example.com/pool": "warm"},
            1.0,
            id="TestWarmupPolicyScore: custom label and value, match",
        ),
        pytest.param(
            {"warmupLabel": "node.example.com/pool", "warmupLabelValue": "warm"},
            {"node.example.com/pool": "cold"},
            0.0,
            id="TestWarmupPolicyScore: custom label and value, mismatch",
        ),
        pytest.param(
            {"warmupLabelValue": ""},
            {},
            1.0,
            id="Score: an empty value matches a node without the label (Go map read)",
        ),
        pytest.param(
            {"warmupLabelValue": 1}, {"node.volcano.sh/warmup": "true"}, 1.0, id="GetString"
        ),
    ],
)
def test_warmup_policy_score(args: dict[str, object], labels: dict[str, str], want: float) -> None:
    assert Warmup.from_arguments(args).score([labels]).tolist() == [want]


def test_get_policy_not_found() -> None:
    """``TestGetPolicyNotFound``; the registry holds the three built-ins (``builtin.init``)."""
    with pytest.raises(ValueError, match="policy non-existent-policy not found"):
        build_policy("non-existent-policy", {})
    assert isinstance(build_policy("warmup", {}), Warmup)
    assert isinstance(build_policy("node-limit", {}), NodeLimit)
