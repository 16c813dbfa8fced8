"""rescheduling: the shuffle action moves pods off crowded nodes while others sit nearly idle.

Follows Volcano's ``rescheduling`` plugin (``pkg/scheduler/plugins/rescheduling``: its
``lowNodeUtilization`` strategy, ``victimsFnForLnu``, ``groupNodesByUtilization``,
``evictPodsFromSourceNodes``, ``sortNodes``, ``sortPods``, ``evict``), measured on what pods
request rather than on a metrics source (Caldera reads none yet):

- Utilization of a node: its pods' cpu and memory requests and its pod count, in percent of its
  allocatable. A schedulable node under every ``thresholds`` entry is *low*; any other node over
  some ``targetThresholds`` entry is *high*. Nothing moves unless there are both, and not every
  node is low.
- The room on low nodes is, per cpu and memory, the sum of (target − utilization) of each.
- High nodes are emptied in order of cpu% + memory% (highest first); on each, Running pods go in
  order of priority (none first, then lowest), then QoS (BestEffort, Burstable, Guaranteed), while
  the node is still over a target and room is left (unlike Volcano, which only stops at room of
  exactly zero, a negative room stops too).
- Pods whose priority is at or above ``thresholdPriorityClassName``'s (default
  ``system-cluster-critical``) are never chosen, as the Kubernetes descheduler's parameter means.
- The strategies run once per ``interval`` (default 5m): between two runs the plugin names no
  victim, so no more than one strategy's worth is evicted per interval.

Strategies other than ``lowNodeUtilization`` (Volcano's design names ``offlineOnly`` and
``lowPriorityFirst``, which no Volcano release implements) load with a warning and do nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import AliasChoices, Field, field_validator, model_validator

from caldera.api.resources import CPU, MEMORY, PODS
from caldera.api.task import Task, TaskStatus
from caldera.framework.duration import parse_go_duration
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.models.core import qos_rank

__all__ = ["LowNodeUtilization", "ReschedulingArgs", "ReschedulingPlugin"]

log = logging.getLogger(__name__)

LOW_NODE_UTILIZATION = "lowNodeUtilization"
BUILT_IN_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
"""The API server's own PriorityClasses, for a cluster (or manifests) that does not list them."""
_warned: set[str] = set()


def _percent(alias: str) -> Any:
    return Field(100.0, ge=0, le=100, validation_alias=AliasChoices(*alias.split("|")))


class Thresholds(Args):
    """Percentages of a node's allocatable."""

    cpu: float = _percent("cpu")
    memory: float = _percent("memory")
    pods: float = _percent("pods|pod")


class LowNodeUtilization(Args):
    thresholds: Thresholds = Field(default_factory=Thresholds)
    target_thresholds: Thresholds = Field(default_factory=Thresholds, alias="targetThresholds")
    threshold_priority_class_name: str = Field(
        "system-cluster-critical", alias="thresholdPriorityClassName"
    )
    node_fit: bool = Field(True, alias="nodeFit")
    """Accepted; the shuffle action evicts and the next sessions place the pods anew."""
    number_of_nodes: int = Field(0, ge=0, alias="numberOfNodes")
    """Accepted, as in Volcano, which reads it nowhere."""


class Strategy(Args):
    name: str
    parameters: LowNodeUtilization = Field(
        default_factory=LowNodeUtilization,
        validation_alias=AliasChoices("parameters", "params"),
    )

    @model_validator(mode="before")
    @classmethod
    def _only_known(cls, data: Any) -> Any:
        """The parameters of a strategy Caldera does not have are not read."""
        if isinstance(data, dict) and data.get("name") != LOW_NODE_UTILIZATION:
            return {k: v for k, v in data.items() if k not in ("parameters", "params")}
        return data


class ReschedulingArgs(Args):
    interval: str = "5m"
    metrics_period: str = Field("5m", alias="metricsPeriod")
    """Accepted; utilization is measured on requests, not metrics."""
    strategies: list[Strategy] = Field(
        default_factory=lambda: [Strategy(name=LOW_NODE_UTILIZATION)]
    )

    @field_validator("interval", "metrics_period")
    @classmethod
    def _duration(cls, value: str) -> str:
        if parse_go_duration(value) <= 0:
            raise ValueError("must be a positive duration, e.g. 5m")
        return value

    @property
    def low_node_utilization(self) -> LowNodeUtilization | None:
        """The ``lowNodeUtilization`` strategy's parameters, if it is listed."""
        return next((s.parameters for s in self.strategies if s.name == LOW_NODE_UTILIZATION), None)

    def passed_over(self) -> list[tuple[str, str, str]]:
        return [
            (
                f"['strategies'][{i}]['name']",
                f"no rescheduling strategy {s.name!r} (known: {LOW_NODE_UTILIZATION})",
                "it does nothing",
            )
            for i, s in enumerate(self.strategies)
            if s.name != LOW_NODE_UTILIZATION
        ]


def _has_priority(task: Task) -> bool:
    """The pod states a priority (admission fills ``spec.priority`` from its class)."""
    return task.spec.priority is not None or bool(task.spec.priority_class_name)


class ReschedulingPlugin(Plugin[ReschedulingArgs]):
    name: ClassVar[str] = "rescheduling"
    Args = ReschedulingArgs

    def on_session_open(self, ssn: SessionView) -> None:
        conf = self.args.low_node_utilization
        if conf is None:
            return
        memory: dict[str, float] = ssn.registry.memory.setdefault(self.name, {})
        interval = parse_go_duration(self.args.interval)

        def victims(candidates: Sequence[Task]) -> list[Task]:
            if memory.get("last_run", -math.inf) + interval > ssn.now:
                return []
            memory["last_run"] = ssn.now
            return self._low_node_utilization(ssn, conf, candidates)

        ssn.victim_tasks_point.add(self.name, victims)

    def _low_node_utilization(
        self, ssn: SessionView, conf: LowNodeUtilization, candidates: Sequence[Task]
    ) -> list[Task]:
        nodes, space = ssn.nodes, ssn.space
        cols = [space.index[CPU], space.index[MEMORY], space.index[PODS]]
        alloc = nodes.allocatable[:, cols]
        used = nodes.used[:, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            usage = np.where(alloc > 0, used * 100.0 / alloc, 0.0)
        low_t = np.array([conf.thresholds.cpu, conf.thresholds.memory, conf.thresholds.pods])
        high_t = np.array(
            [
                conf.target_thresholds.cpu,
                conf.target_thresholds.memory,
                conf.target_thresholds.pods,
            ]
        )
        low = ~nodes.unschedulable & (usage <= low_t).all(axis=1)
        high = ~low & (usage > high_t).any(axis=1)
        if not low.any() or low.all() or not high.any():
            return []
        # room on the low nodes, cpu and memory (engine units)
        room = ((high_t[:2] * alloc[low, :2] / 100.0) - used[low, :2]).sum(axis=0)
        ceiling = self._ceiling(ssn, conf.threshold_priority_class_name)
        movable = {
            id(t): t
            for t in candidates
            if t.status is TaskStatus.RUNNING and t.node >= 0 and t.priority < ceiling
        }
        order = np.flatnonzero(high)
        order = order[np.argsort(-(usage[order, 0] + usage[order, 1]), kind="stable")]
        victims: list[Task] = []
        for row in order:
            node_usage = usage[row].copy()
            pods = sorted(
                (t for t in nodes.tasks[row].values() if id(t) in movable),
                key=lambda t: (_has_priority(t), t.priority, qos_rank(t.spec)),
            )
            for task in pods:
                if not (node_usage > high_t).any() or (room <= 0).any():
                    break
                request = task.resreq[cols[:2]]
                room = room - request
                node_usage[:2] -= np.where(
                    alloc[row, :2] > 0, request * 100.0 / alloc[row, :2], 0.0
                )
                victims.append(task)
        return victims

    @staticmethod
    def _ceiling(ssn: SessionView, class_name: str) -> float:
        """The priority at and above which pods stay."""
        if not class_name:
            return math.inf
        value = ssn.snapshot.priority_classes.get(class_name, BUILT_IN_CLASSES.get(class_name))
        if value is None:
            if class_name not in _warned:
                _warned.add(class_name)
                log.warning(
                    "rescheduling: thresholdPriorityClassName %r names no PriorityClass; "
                    "no pod is kept back by priority",
                    class_name,
                )
            return math.inf
        return float(value)
