"""resource-strategy-fit: a LeastAllocated or MostAllocated strategy per resource, scarce-resource
avoidance (SRA) and a proportional predicate, as Volcano's plugin of that name.

Scoring. For every resource the task requests (cpu, memory, extended; not the pod slot) that the
``resources`` table names (exactly, else by the longest ``prefix/*`` pattern) with weight ``w``:
``MostAllocated`` scores ``(used + request) / allocatable × w``, ``LeastAllocated`` scores
``(allocatable - used - request) / allocatable × w``; a node that does not advertise the resource
scores 0 for it but its weight still counts. The sum over the weight sum, × 100 ×
``resourceStrategyFitWeight``, is the node's score; a node one of those resources would overflow
scores 0. A pod may override the table with ``volcano.sh/resource-strategy-scoring-type`` (one
type for every resource it is scored on) and ``volcano.sh/resource-strategy-weight`` (a JSON map
of resource → weight: only those resources are scored); an annotation that cannot be read makes
this part score 0 for the pod (warned once per pod).

SRA (``sra.enable``). Nodes advertising the listed scarce resources score lower, so pods that do
not need them go elsewhere: ``(1 - Σ weights of the listed resources the node has / Σ weights)
× 100 × sra.weight``; a node lacking a resource the task requests scores 0.

Proportional (``proportional.enable``). A task that requests none of the listed resources may not
take a node's idle cpu or memory below what its idle units of each listed resource reserve
(``resourceProportion``: ``<resource>.cpu`` cores and ``<resource>.memory`` GB, decimal, per
unit); such a node is rejected with ``proportional of resource <name> check failed``.

Everything is vectorised over the candidate rows; the scores are local (a node's own row and the
task's request and annotations), so the session's score cache applies.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from caldera.api.node import NodeTable
from caldera.api.resources import CPU, MEMORY, PODS, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer

__all__ = [
    "SCORING_TYPE_ANNOTATION",
    "WEIGHT_ANNOTATION",
    "ResourceStrategyFitArgs",
    "ResourceStrategyFitPlugin",
    "Strategy",
    "resolve",
]

log = logging.getLogger(__name__)

SCORING_TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
ScoringType = Literal["LeastAllocated", "MostAllocated"]
LEAST: ScoringType = "LeastAllocated"
MOST: ScoringType = "MostAllocated"
MAX_NODE_SCORE = 100.0
_MILLI = 1000.0
"""Millicores per core: a proportional ``.cpu`` rate is cores per unit."""
_GB = 1e9
"""Bytes per decimal GB: a proportional ``.memory`` rate is GB per unit (Volcano's 1000 × 1000
on its milli-unit counts)."""
_SUFFIXES = (".cpu", ".memory")
_warned: set[tuple[str, str]] = set()
"""(pod uid, problem) pairs already logged."""

BoolArray = npt.NDArray[np.bool_]
V = TypeVar("V")


def pattern_error(name: str) -> str | None:
    """Why ``name`` is not a resource name or a ``prefix*`` pattern (one trailing ``*`` after a
    non-empty prefix), or ``None``."""
    if not name:
        return "a resource name may not be empty"
    if "*" not in name:
        return None
    if name == "*":
        return "'*' alone is not a pattern; name a prefix such as 'nvidia.com/*'"
    if not name.endswith("*") or name.count("*") != 1:
        return f"{name!r}: a pattern may only have one '*', at its end"
    return None


def resolve(table: Mapping[str, V], name: str) -> V | None:
    """``table``'s entry for resource ``name``: its exact key, else the ``prefix*`` key with the
    longest prefix of ``name``, else ``None``."""
    if name in table:
        return table[name]
    best: tuple[int, V] | None = None
    for key, value in table.items():
        if key.endswith("*"):
            prefix = key[:-1]
            if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), value)
    return None if best is None else best[1]


def _names(text: str) -> list[str]:
    """The items of a comma-separated list, trimmed, empty ones dropped."""
    return [n for n in (part.strip() for part in text.split(",")) if n]


class Strategy(Args):
    """One ``resources`` entry."""

    type: ScoringType = LEAST
    weight: int = Field(1, ge=1)


DEFAULT_RESOURCES: Mapping[str, Strategy] = {CPU: Strategy(), MEMORY: Strategy()}


class SraArgs(Args):
    enable: bool = False
    resources: str = ""
    weight: int = Field(0, ge=0)
    """No default in Volcano either: without it SRA scores nothing."""
    resource_weight: dict[str, int] = Field(default_factory=dict, alias="resourceWeight")

    @model_validator(mode="after")
    def _check(self) -> SraArgs:
        listed = set(_names(self.resources))
        for name, weight in self.resource_weight.items():
            if name not in listed:
                raise ValueError(f"resourceWeight[{name!r}]: not listed in sra.resources")
            if weight < 0:
                raise ValueError(f"resourceWeight[{name!r}] must be ≥ 0, not {weight}")
        return self

    def weights(self) -> dict[str, int]:
        """Listed scarce resource → weight (1 unless ``resourceWeight`` says)."""
        return {n: self.resource_weight.get(n, 1) for n in _names(self.resources)}


class ProportionalArgs(Args):
    enable: bool = False
    resources: str = ""
    resource_proportion: dict[str, float] = Field(default_factory=dict, alias="resourceProportion")

    @model_validator(mode="after")
    def _check(self) -> ProportionalArgs:
        listed = set(_names(self.resources))
        for key, rate in self.resource_proportion.items():
            base, dot, part = key.rpartition(".")
            if not dot or f".{part}" not in _SUFFIXES:
                raise ValueError(f"resourceProportion[{key!r}]: must be <resource>.cpu or .memory")
            if base not in listed:
                raise ValueError(
                    f"resourceProportion[{key!r}]: {base!r} is not listed in proportional.resources"
                )
            if rate < 0:
                raise ValueError(f"resourceProportion[{key!r}] must be ≥ 0, not {rate}")
        return self

    def rates(self) -> dict[str, tuple[float, float]]:
        """Listed resource → (cores, GB) reserved per idle unit (1 and 1 unless given)."""
        get = self.resource_proportion.get
        return {n: (get(f"{n}.cpu", 1.0), get(f"{n}.memory", 1.0)) for n in _names(self.resources)}


class ResourceStrategyFitArgs(Args):
    weight: int = Field(10, alias="resourceStrategyFitWeight", ge=0)
    resources: dict[str, Strategy] = Field(default_factory=dict)
    """Empty (or absent): cpu and memory, LeastAllocated, weight 1."""
    sra: SraArgs = Field(default_factory=SraArgs)
    proportional: ProportionalArgs = Field(default_factory=ProportionalArgs)

    @field_validator("resources")
    @classmethod
    def _patterns(cls, value: dict[str, Strategy]) -> dict[str, Strategy]:
        for name in value:
            error = pattern_error(name)
            if error:
                raise ValueError(error)
        return value

    def table(self) -> Mapping[str, Strategy]:
        return self.resources or DEFAULT_RESOURCES


@dataclass(frozen=True, slots=True)
class Profile:
    """Per resource column: the weight a task is scored with (0: not scored) and whether
    MostAllocated (else LeastAllocated) applies."""

    weights: Vector
    most: BoolArray


def _profile(space: ResourceSpace, strategy_of: Mapping[str, tuple[str, int]]) -> Profile:
    weights = np.zeros(len(space), dtype=np.float64)
    most = np.zeros(len(space), dtype=bool)
    for col, name in enumerate(space.names):
        found = resolve(strategy_of, name) if name != PODS else None
        if found is not None:
            most[col] = found[0] == MOST
            weights[col] = found[1]
    return Profile(weights, most)


def pod_profile(
    space: ResourceSpace, table: Mapping[str, Strategy], kind: str | None, weights: str | None
) -> Profile | str:
    """The profile of a pod whose annotations give scoring type ``kind`` and weight map
    ``weights`` (either may be absent), or why they cannot be used."""
    if kind is not None and kind not in (LEAST, MOST):
        return f"{SCORING_TYPE_ANNOTATION}: {kind!r} is neither {LEAST} nor {MOST}"
    if weights is None:
        chosen = {name: (kind or s.type, s.weight) for name, s in table.items()}
        return _profile(space, chosen)
    try:
        parsed = json.loads(weights)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return f"{WEIGHT_ANNOTATION}: not a JSON map of resource name to weight: {weights!r}"
    chosen = {}
    for name, weight in parsed.items():
        bad = pattern_error(name)
        if bad:
            return f"{WEIGHT_ANNOTATION}: {bad}"
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            return f"{WEIGHT_ANNOTATION}: {name!r}: a weight is an integer ≥ 0, not {weight!r}"
        configured = resolve(table, name)
        chosen[name] = (kind or (configured.type if configured else LEAST), weight)
    return _profile(space, chosen)


def _annotations(task: Task) -> tuple[str | None, str | None]:
    return task.annotations.get(SCORING_TYPE_ANNOTATION), task.annotations.get(WEIGHT_ANNOTATION)


def strategy_score(nodes: NodeTable, task: Task, idx: IntArray, profile: Profile) -> Vector:
    """Weighted mean of the per-resource strategy scores of ``task`` on rows ``idx``, in 0–1;
    0 on a row one of the scored resources would overflow."""
    req = task.resreq
    cols = np.flatnonzero((req > 0) & (profile.weights > 0))
    if len(cols) == 0:
        return np.zeros(len(idx), dtype=np.float64)
    alloc = nodes.allocatable[np.ix_(idx, cols)]
    final = nodes.used[np.ix_(idx, cols)] + req[cols]
    has = alloc > 0
    safe = np.where(has, alloc, 1.0)
    used_share = np.where(has, final / safe, 0.0)
    free_share = np.where(has, (alloc - final) / safe, 0.0)
    weights = profile.weights[cols]
    per = np.where(profile.most[cols], used_share, free_share) * weights
    out: Vector = per.sum(axis=1) / weights.sum()
    out[(has & (final > alloc)).any(axis=1)] = 0.0
    return out


def sra_score(nodes: NodeTable, sra: SraArgs) -> Vector:
    """Per node, in 0–1: 1 minus the weight share of the listed scarce resources it has."""
    space = nodes.space
    weights = sra.weights()
    total = float(sum(weights.values()))
    held = np.zeros(len(nodes), dtype=np.float64)
    for name, weight in weights.items():
        col = space.index.get(name)
        if col is not None:
            held += np.where(nodes.allocatable[:, col] > 0, float(weight), 0.0)
    if total <= 0:
        return np.zeros(len(nodes), dtype=np.float64)
    out: Vector = 1.0 - held / total
    return out


def proportional_rejections(
    nodes: NodeTable, task: Task, rates: Mapping[str, tuple[float, float]]
) -> list[Rejection]:
    """Nodes whose idle cpu or memory, less the task's request, would fall below what their idle
    units of a listed resource reserve; nothing for a task that requests a listed resource."""
    space, req = nodes.space, task.resreq
    cols = {name: space.index[name] for name in rates if name in space.index}
    if any(req[col] > 0 for col in cols.values()):
        return []
    cpu, mem = space.index[CPU], space.index[MEMORY]
    cpu_left = nodes.idle[:, cpu] - req[cpu]
    mem_left = nodes.idle[:, mem] - req[mem]
    decided = np.zeros(len(nodes), dtype=bool)
    out: list[Rejection] = []
    for name, col in cols.items():
        cores, gigabytes = rates[name]
        idle = nodes.idle[:, col]
        short = (cpu_left < idle * cores * _MILLI) | (mem_left < idle * gigabytes * _GB)
        bad = (nodes.allocatable[:, col] > 0) & short & ~decided
        if bad.any():
            out.append((f"proportional of resource {name} check failed", bad))
            decided |= bad
    return out


class ResourceStrategyFitPlugin(Plugin[ResourceStrategyFitArgs]):
    name: ClassVar[str] = "resource-strategy-fit"
    Args = ResourceStrategyFitArgs

    def on_session_open(self, ssn: SessionView) -> None:
        args, nodes = self.args, ssn.nodes
        if args.weight > 0:
            ssn.node_order_point.add(self.name, self._strategy_scorer(ssn))
        if args.sra.enable and args.sra.weight > 0:
            ssn.node_order_point.add(self.name, self._sra_scorer(ssn))
        if args.proportional.enable and args.proportional.rates():
            rates = args.proportional.rates()
            ssn.predicate_point.add(
                self.name, lambda task: proportional_rejections(nodes, task, rates)
            )

    def _strategy_scorer(self, ssn: SessionView) -> NodeScorer:
        nodes, space, table = ssn.nodes, ssn.space, self.args.table()
        scale = MAX_NODE_SCORE * self.args.weight
        default = pod_profile(space, table, None, None)
        assert isinstance(default, Profile)
        profiles: dict[tuple[str | None, str | None], Profile | str] = {(None, None): default}

        def score(task: Task, idx: IntArray) -> Vector | float:
            key = _annotations(task)
            profile = profiles.get(key)
            if profile is None:
                profile = profiles[key] = pod_profile(space, table, *key)
            if isinstance(profile, str):
                if (task.uid, profile) not in _warned:
                    _warned.add((task.uid, profile))
                    log.warning("pod %s: %s; resource-strategy-fit scores it 0", task.key, profile)
                return 0.0
            return strategy_score(nodes, task, idx, profile) * scale

        return NodeScorer(score, local=True, variant=_annotations)

    def _sra_scorer(self, ssn: SessionView) -> NodeScorer:
        nodes = ssn.nodes
        base = sra_score(nodes, self.args.sra) * (MAX_NODE_SCORE * self.args.sra.weight)

        def score(task: Task, idx: IntArray) -> Vector:
            wanted = np.flatnonzero(task.resreq > 0)
            wanted = wanted[wanted != nodes.space.index[PODS]]
            lacking = (nodes.allocatable[np.ix_(idx, wanted)] == 0).any(axis=1)
            out: Vector = np.where(lacking, 0.0, base[idx])
            return out

        return NodeScorer(score, local=True)
