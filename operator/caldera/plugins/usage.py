"""usage: nodes whose real CPU or memory load is above a threshold take no new pods, and
less-loaded nodes score higher.

Follows Volcano's ``pkg/scheduler/plugins/usage`` (``predicateFn``, ``nodeOrderFn`` with
``calcNodeScore`` and ``CalcCompositeUtilization``, ``estimator.go``, ``shadow_cache.go``):

* **Filter.** With fresh metrics (measured at most 5 minutes before the session), a node whose
  CPU use is above ``thresholds.cpu`` percent is refused with "the CPU load of the node exceeds
  the upper limit."; else one whose memory use is above ``thresholds.mem``, with "the memory load
  of the node exceeds the upper limit.". Stale or missing metrics refuse nothing.
* **Score.** ``((1 - cpu) × cpu.weight + (1 - memory) × memory.weight) / (cpu.weight +
  memory.weight) × 100 × usage.weight``, where each term is the node's composite utilisation:
  its measured load plus an estimate for the pods placed on it that the metrics cannot show yet
  (placed this session or bound, or started less than one metrics interval ago), as a share of
  the node (capped at 1). Stale metrics score 0.
* **Estimate** (the ``estimator`` arguments): ``(request × request_ratio + (limit − request) ×
  burst_ratio) × risk`` per resource, at most the limit; ``be_cpu``/``be_mem`` for a best-effort
  pod; ``risk`` is ``risk_factor`` once the node's composite utilisation reaches
  ``risk_threshold``, else 1.

The node's share is taken of its allocatable (Volcano divides by capacity). The metrics come
from the snapshot (:class:`~caldera.api.usage.NodeUsage`): the engine never queries a source.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator

from caldera.api.resources import CPU, MEMORY
from caldera.api.task import Task, TaskStatus
from caldera.framework.duration import metrics_interval
from caldera.framework.interfaces import EventHandler, IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.quantity import QuantityError, parse_quantity

__all__ = ["CPU_REASON", "MEMORY_REASON", "UsageArgs", "UsagePlugin"]

log = logging.getLogger(__name__)

CPU_REASON = "the CPU load of the node exceeds the upper limit."
MEMORY_REASON = "the memory load of the node exceeds the upper limit."
ACTIVE = 300.0
"""Metrics older than this (seconds) are not used (Volcano's ``MetricsActiveTime``)."""
MAX_NODE_SCORE = 100.0
_ESTIMATED = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND})


def _number(value: Any) -> float | None:
    """An int, float or numeric string (Volcano's ``GetFloat64``/``GetInt`` accept all three)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _default(cls: Any, info: Any) -> Any:
    """The default of the field being validated (written once, on the field)."""
    return cls.model_fields[info.field_name].default


def _bounded(low: float, high: float | None) -> Any:
    """A validator keeping the field's default (with a warning) for a value outside
    [low, high] (``parseBoundedFloatArg``, ``parseMinFloatArg``)."""

    def check(cls: Any, value: Any, info: Any) -> float:
        default: float = _default(cls, info)
        number = _number(value)
        if number is None or number < low or (high is not None and number > high):
            span = f"[{low:g}, {high:g}]" if high is not None else f">= {low:g}"
            log.warning(
                "usage: could not parse argument %r for key %s, expected a value in %s; using %g",
                value,
                info.field_name,
                span,
                default,
            )
            return default
        return number

    return check


class Thresholds(Args):
    cpu: float = 80.0
    mem: float = 80.0

    _cpu = field_validator("cpu", mode="before")(_bounded(0.0, 100.0))
    _mem = field_validator("mem", mode="before")(_bounded(0.0, 100.0))


class Estimator(Args):
    request_ratio: float = 0.7
    burst_ratio: float = 0.0
    risk_threshold: float = 0.6
    risk_factor: float = 1.2
    be_cpu: float = 250.0
    """Millicores assumed for a best-effort pod."""
    be_mem: float = 200.0 * 1024 * 1024
    """Bytes assumed for a best-effort pod."""

    _request = field_validator("request_ratio", mode="before")(_bounded(0.0, 1.0))
    _burst = field_validator("burst_ratio", mode="before")(_bounded(0.0, 1.0))
    _risk = field_validator("risk_threshold", mode="before")(_bounded(0.0, 1.0))
    _factor = field_validator("risk_factor", mode="before")(_bounded(1.0, None))

    @field_validator("be_cpu", "be_mem", mode="before")
    @classmethod
    def _quantity(cls, value: Any, info: Any) -> float:
        """``parseCPUQuantityArg`` / ``parseMemoryQuantityArg``."""
        default: float = _default(cls, info)
        text = value if isinstance(value, str) else str(value)
        if text[-2:] in ("mi", "gi", "ki"):  # Volcano normalises lower-case binary suffixes
            text = text[:-2] + text[-2].upper() + "i"
        try:
            quantity = parse_quantity(text)
        except QuantityError:
            log.warning(
                "usage: estimator %s %r is not a quantity; using the default",
                info.field_name,
                value,
            )
            return default
        return float(quantity * 1000 if info.field_name == "be_cpu" else quantity)


class UsageArgs(Args):
    usage_weight: float = Field(5.0, alias="usage.weight")
    cpu_weight: float = Field(1.0, alias="cpu.weight")
    memory_weight: float = Field(1.0, alias="memory.weight")
    thresholds: Thresholds = Field(default_factory=Thresholds)
    estimator: Estimator = Field(default_factory=Estimator)

    @field_validator("usage_weight", "cpu_weight", "memory_weight", mode="before")
    @classmethod
    def _weight(cls, value: Any) -> float:
        number = _number(value)
        if number is None or number != int(number):
            raise ValueError(f"expected a whole number, not {value!r}")
        return number


class UsagePlugin(Plugin[UsageArgs]):
    name: ClassVar[str] = "usage"
    Args = UsageArgs

    def on_session_open(self, ssn: SessionView) -> None:
        args = self.args
        table = ssn.nodes
        n = len(table.names)
        cpu_pct = np.zeros(n)
        mem_pct = np.zeros(n)
        fresh = np.zeros(n, dtype=bool)
        for row, name in enumerate(table.names):
            usage = ssn.snapshot.node_usage.get(name)
            measured = usage.measured if usage is not None else None
            if usage is not None and measured is not None and ssn.now - measured <= ACTIVE:
                cpu_pct[row], mem_pct[row], fresh[row] = usage.cpu, usage.memory, True
        cpu_cap = table.allocatable[:, ssn.space.index[CPU]]
        mem_cap = table.allocatable[:, ssn.space.index[MEMORY]]
        est_cpu = np.zeros(n)
        est_mem = np.zeros(n)
        estimates: dict[str, tuple[int, float, float]] = {}
        cw, mw, uw = args.cpu_weight, args.memory_weight, args.usage_weight
        est = args.estimator
        delay = metrics_interval(ssn.policy.metrics)

        def composite(rows: IntArray | int) -> tuple[Any, Any]:
            cpu = _share(cpu_pct[rows], est_cpu[rows], cpu_cap[rows])
            mem = _share(mem_pct[rows], est_mem[rows], mem_cap[rows])
            return cpu, mem

        cpu_l, mem_l = cpu_pct.tolist(), mem_pct.tolist()
        cpu_cap_l, mem_cap_l = cpu_cap.tolist(), mem_cap.tolist()
        fresh_l = fresh.tolist()

        def one(row: int) -> tuple[float, float]:
            """``composite`` of one node, in plain floats (a placement changes one node)."""
            return (
                _share_one(cpu_l[row], float(est_cpu[row]), cpu_cap_l[row]),
                _share_one(mem_l[row], float(est_mem[row]), mem_cap_l[row]),
            )

        def add(task: Task, rescored: bool = True) -> None:
            """``EstimatePodResource`` of a pod placed on a node (``calcAppliedRiskFactor``
            with the node's composite utilisation; ``EstimateBestEffortResource`` for a
            best-effort pod), added to the node's estimate."""
            row = task.node
            if row < 0 or task.uid in estimates:
                return
            cpu, mem = one(row)
            util = (cpu * cw + mem * mw) / (cw + mw) if cw + mw else 0.0
            risk = est.risk_factor if util >= est.risk_threshold else 1.0
            if task.best_effort:
                c, m = est.be_cpu * risk, est.be_mem * risk
            else:
                limit_cpu, limit_mem = _limits(task)
                c = _estimate(task.resreq[ssn.space.index[CPU]], limit_cpu, est, risk)
                m = _estimate(task.resreq[ssn.space.index[MEMORY]], limit_mem, est, risk)
            estimates[task.uid] = (row, c, m)
            est_cpu[row] += c
            est_mem[row] += m
            if rescored:
                rescore(row)

        def remove(task: Task) -> None:
            """``SubEstimateBySnapshot``: the estimate added for the pod, taken back."""
            got = estimates.pop(task.uid, None)
            if got is not None:
                row, c, m = got
                est_cpu[row] = max(est_cpu[row] - c, 0.0)
                est_mem[row] = max(est_mem[row] - m, 0.0)
                rescore(row)

        def value(cpu: Any, mem: Any) -> Any:
            """``calcNodeScore`` of composite utilisations (arrays or plain floats)."""
            return ((1 - cpu) * cw + (1 - mem) * mw) / (cw + mw) * MAX_NODE_SCORE * uw

        def node_scores(rows: Any) -> Any:
            return np.where(fresh[rows], value(*composite(rows)), 0.0)

        scores = np.zeros(n)
        """Every node's score, kept current row by row as estimates change (a task's score is a
        lookup)."""

        def rescore(row: int) -> None:
            if cw + mw and fresh_l[row]:
                scores[row] = value(*one(row))

        for tasks in table.tasks:  # the shadow cache's warm-up (``shouldAddToShadowCache``)
            for task in tasks.values():
                if task.status in _ESTIMATED or (
                    task.status is TaskStatus.RUNNING
                    and (task.started <= 0 or ssn.now - task.started < delay)
                ):
                    add(task, rescored=False)

        if cw + mw:  # every node at once, after the warm-up
            scores[:] = node_scores(slice(None))

        def score(task: Task, rows: IntArray) -> Any:
            return scores[rows]

        over_cpu = fresh & (cpu_pct > args.thresholds.cpu)
        over_mem = fresh & ~over_cpu & (mem_pct > args.thresholds.mem)
        verdict: list[Rejection] = [
            (reason, mask)
            for reason, mask in ((CPU_REASON, over_cpu), (MEMORY_REASON, over_mem))
            if mask.any()
        ]

        ssn.predicate_point.add(self.name, lambda task: verdict)
        ssn.node_order_point.add(self.name, NodeScorer(score))
        ssn.event_handlers.add(self.name, EventHandler(allocate=add, deallocate=remove))


def _share(percent: Any, estimate: Any, capacity: Any) -> Any:
    """``CalcCompositeUtilization``: (measured + estimated) / capacity, in [0, 1]; 0 for a node
    of no capacity."""
    safe = np.where(capacity > 0, capacity, 1.0)
    value = (percent / 100.0 * capacity + estimate) / safe
    return np.where(capacity > 0, np.clip(value, 0.0, 1.0), 0.0)


def _share_one(percent: float, estimate: float, capacity: float) -> float:
    """:func:`_share` of one node."""
    if capacity <= 0:
        return 0.0
    return min(max((percent / 100.0 * capacity + estimate) / capacity, 0.0), 1.0)


def _estimate(request: float, limit: float, est: Estimator, risk: float) -> float:
    """``EstimatePodResource``: the request and a share of the burst above it, times the risk
    factor, within [0, the effective limit]."""
    effective = limit if limit > 0 and limit >= request else request
    value = (request * est.request_ratio + (effective - request) * est.burst_ratio) * risk
    return float(min(max(value, 0.0), effective))


def _limits(task: Task) -> tuple[float, float]:
    """The pod's CPU (millicores) and memory (bytes) limits: its containers' sum, or an init
    container's if larger (``getPodCPURequestLimit``, ``getPodMemRequestLimit``)."""

    def of(containers: Any) -> tuple[float, float]:
        cpu = sum(c.resources.limits.get(CPU, 0.0) for c in containers)
        mem = sum(c.resources.limits.get(MEMORY, 0.0) for c in containers)
        return cpu, mem

    cpu, mem = of(task.spec.containers)
    for init in task.spec.init_containers:
        cpu = max(cpu, init.resources.limits.get(CPU, 0.0))
        mem = max(mem, init.resources.limits.get(MEMORY, 0.0))
    return cpu, mem
