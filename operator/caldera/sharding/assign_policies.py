"""The sharding controller's three built-in node policies, vectorised over the nodes.

Volcano's sharding controller (``pkg/controllers/sharding``) runs, for each scheduler, a chain of
policies through three phases (``ShardingManager.runPipeline``): every *Filterer* must accept a
node, every *Scorer* adds ``weight × score`` to its rank, every *Selector* trims the ranked list.
This module holds the policies as ``pkg/controllers/sharding/policy`` defines them, each built from
its ``arguments`` map the way its ``Initialize`` reads it (``policy/arguments.go``: ``GetInt``,
``GetFloat64``, ``GetString``) and refusing what its ``Initialize`` refuses, with the same texts:

- ``allocation-rate`` (``policy/allocationrate``): Filterer and Scorer on the node's CPU
  utilisation, rounded to two decimals on both sides (``roundUtil``);
- ``warmup`` (``policy/warmup``): Scorer, 1 for a node carrying the warm-up label, else 0;
- ``node-limit`` (``policy/nodelimit``): Selector, at most ``maxNodes`` (``minNodes`` only logged).

The registry (``policy/registry.go``, ``policy/builtin``) is :data:`BUILDERS`. Filters and scores
take numpy arrays over the candidate nodes, one value per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALLOCATION_RATE",
    "ARG_MAX_CPU_UTIL",
    "ARG_MAX_NODES",
    "ARG_MIN_CPU_UTIL",
    "ARG_MIN_NODES",
    "ARG_WARMUP_LABEL",
    "ARG_WARMUP_LABEL_VALUE",
    "BUILDERS",
    "NODE_LIMIT",
    "WARMUP",
    "WARMUP_LABEL",
    "WARMUP_LABEL_VALUE",
    "AllocationRate",
    "NodeLimit",
    "ShardPolicy",
    "Warmup",
    "build_policy",
    "get_float",
    "get_int",
    "get_string",
    "round_util",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

ALLOCATION_RATE = "allocation-rate"
WARMUP = "warmup"
NODE_LIMIT = "node-limit"
"""The registered policy names (each package's ``PolicyName``)."""

ARG_MIN_CPU_UTIL = "minCPUUtil"
ARG_MAX_CPU_UTIL = "maxCPUUtil"
ARG_MIN_NODES = "minNodes"
ARG_MAX_NODES = "maxNodes"
ARG_WARMUP_LABEL = "warmupLabel"
ARG_WARMUP_LABEL_VALUE = "warmupLabelValue"

WARMUP_LABEL = "node.volcano.sh/warmup"
WARMUP_LABEL_VALUE = "true"
"""The warm-up label's default key and value (``warmup.New``; ``IsWarmupNode`` in
``calculateMetricsFromPodsAndNode``)."""

_UTIL_QUANT = 100.0
"""``utilQuant``: utilisations are compared and scored at two decimals."""


def get_int(args: Mapping[str, object], key: str, default: int) -> int:
    """``Arguments.GetInt``: an integer, or a number truncated toward zero (YAML numbers reach Go
    as float64); anything else is ignored (Volcano logs a warning) and ``default`` stays."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default
    return int(value)


def get_float(args: Mapping[str, object], key: str, default: float) -> float:
    """``Arguments.GetFloat64``: a number; anything else is ignored and ``default`` stays."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def get_string(args: Mapping[str, object], key: str, default: str) -> str:
    """``Arguments.GetString``: a string; anything else is ignored and ``default`` stays."""
    value = args.get(key)
    return value if isinstance(value, str) else default


def round_util(util: FloatArray) -> FloatArray:
    """``roundUtil``: ``math.Round(u*100)/100``, halves away from zero as Go's ``math.Round``
    does (numpy's ``round`` would take halves to even)."""
    scaled = util * _UTIL_QUANT
    whole = np.trunc(scaled)
    half_up = np.abs(scaled - whole) >= 0.5  # exact: a float less its integer part
    rounded = whole + np.where(half_up, np.sign(scaled), 0.0)
    return np.asarray(rounded / _UTIL_QUANT, dtype=np.float64)


def _round_one(util: float) -> float:
    return float(round_util(np.array([util], dtype=np.float64))[0])


@dataclass(frozen=True, slots=True)
class AllocationRate:
    """``allocationRatePolicy``: nodes whose rounded CPU utilisation lies in
    ``[minCPUUtil, maxCPUUtil]``, busier nodes first."""

    min_cpu: float
    """``minCPURounded``."""
    max_cpu: float
    """``maxCPURounded``."""

    @classmethod
    def from_arguments(cls, args: Mapping[str, object]) -> AllocationRate:
        """``Initialize``: both bounds default to 0 (an absent ``maxCPUUtil`` leaves only idle
        nodes), and must satisfy ``0 <= min <= max <= 1``."""
        low = get_float(args, ARG_MIN_CPU_UTIL, 0.0)
        high = get_float(args, ARG_MAX_CPU_UTIL, 0.0)
        if low < 0 or high > 1 or low > high:
            raise ValueError(
                f"invalid CPU utilization range [{low:.2f}, {high:.2f}]: "
                "must be within [0.0, 1.0] and min <= max"
            )
        return cls(_round_one(low), _round_one(high))

    def filter(self, util: FloatArray) -> BoolArray:
        """``Filter``: NaN (no metrics for the node) and negative utilisations are refused."""
        rounded = round_util(util)
        ok = (util >= 0) & (rounded >= self.min_cpu) & (rounded <= self.max_cpu)
        return np.asarray(ok, dtype=np.bool_)

    def score(self, util: FloatArray) -> FloatArray:
        """``Score``: the rounded utilisation rescaled from ``[min, max]`` to ``[0, 1]`` and
        clamped; 1 for a collapsed range; 0 without metrics or for a negative utilisation."""
        known = util >= 0  # False for NaN
        if self.max_cpu - self.min_cpu == 0:
            return np.where(known, 1.0, 0.0)
        scaled = (round_util(util) - self.min_cpu) / (self.max_cpu - self.min_cpu)
        return np.where(known, np.clip(scaled, 0.0, 1.0), 0.0)


@dataclass(frozen=True, slots=True)
class Warmup:
    """``warmupPolicy``: a bonus for nodes labelled ``warmupLabel=warmupLabelValue``."""

    label: str = WARMUP_LABEL
    value: str = WARMUP_LABEL_VALUE

    @classmethod
    def from_arguments(cls, args: Mapping[str, object]) -> Warmup:
        """``Initialize``: the label must not be empty (the value may be)."""
        label = get_string(args, ARG_WARMUP_LABEL, WARMUP_LABEL)
        value = get_string(args, ARG_WARMUP_LABEL_VALUE, WARMUP_LABEL_VALUE)
        if label == "":
            raise ValueError("warmupLabel cannot be empty")
        return cls(label, value)

    def score(self, labels: Sequence[Mapping[str, str]]) -> FloatArray:
        """``Score``: 1 where the label's value (``""`` when absent, as a Go map reads) equals
        the configured value, else 0."""
        key, want = self.label, self.value
        hits = [node.get(key, "") == want for node in labels]
        return np.asarray(hits, dtype=np.float64).reshape(len(labels))


@dataclass(frozen=True, slots=True)
class NodeLimit:
    """``nodeLimitPolicy``: keeps the first ``maxNodes`` ranked nodes (``<= 0``: all of them);
    ``minNodes`` is informational, a shortfall is only logged."""

    min_nodes: int = 0
    max_nodes: int = 0

    @classmethod
    def from_arguments(cls, args: Mapping[str, object]) -> NodeLimit:
        """``Initialize``."""
        low = get_int(args, ARG_MIN_NODES, 0)
        high = get_int(args, ARG_MAX_NODES, 0)
        if low < 0:
            raise ValueError(f"invalid minNodes {low}: must be >= 0")
        if 0 < high < low:
            raise ValueError(f"invalid bounds [{low}, {high}]: maxNodes must be >= minNodes")
        return cls(low, high)

    @property
    def cap(self) -> int | None:
        """How many ranked nodes ``Select`` keeps (None: no bound)."""
        return self.max_nodes if self.max_nodes > 0 else None


ShardPolicy = AllocationRate | Warmup | NodeLimit

BUILDERS: Mapping[str, Callable[[Mapping[str, object]], ShardPolicy]] = {
    ALLOCATION_RATE: AllocationRate.from_arguments,
    NODE_LIMIT: NodeLimit.from_arguments,
    WARMUP: Warmup.from_arguments,
}
"""``policy/builtin``'s registrations: name to ``New`` + ``Initialize``."""


def build_policy(name: str, args: Mapping[str, object]) -> ShardPolicy:
    """``GetPolicy`` then ``Initialize``: the policy ``name`` set up from ``args``; ValueError with
    Volcano's text for an unknown name or arguments ``Initialize`` refuses."""
    builder = BUILDERS.get(name)
    if builder is None:
        raise ValueError(f"policy {name} not found")
    return builder(args)
