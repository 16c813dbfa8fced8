"""nodegroup: queues own groups of nodes (the node label ``volcano.sh/nodegroup-name``).

Follows Volcano's ``nodegroup`` plugin (``pkg/scheduler/plugins/nodegroup/nodegroup.go``: its
``predicateFn``, ``nodeOrderFn``, ``queueGroupAffinity.predicate`` and ``.score``,
``checkNodeGroupResourceLimit`` and the allocate/deallocate event handler):

- A queue's ``spec.affinity.nodeGroupAffinity`` / ``nodeGroupAntiAffinity`` list node groups as
  required or preferred. A node of a group the queue lists as required or preferred affinity, or
  as preferred anti-affinity, passes; required anti-affinity wins over affinity. A node of a group
  the queue does not list fails ("node does not satisfy the node group affinity"); a labelled node
  fails for a queue with no affinity at all ("node group affinity not specified"); an unlabelled
  node fails ("node group label not found") unless ``strict: false`` and the queue has no
  affinity. All are ``UnschedulableAndUnresolvable``: preemption does not try those nodes.
- Scores: required affinity 100, preferred 50 (with ``enablePreferredOrder: true``, 50 × (n − i)
  / n for the i-th of n preferred groups, so earlier groups win), preferred anti-affinity −1.
- With the plugin option ``enableHierarchy: true`` a queue without affinity takes its nearest
  ancestor's (``spec.parent``, else ``root``).
- The queue annotation ``volcano.sh/nodegroup-resource-limits`` (JSON: node group → resource
  list) caps what the queue's running and placed pods may hold in each group; a pod that would
  pass a cap is kept off that group's nodes ("nodegroup <g> resource limit exceeded, insufficient
  resources: [cpu]"), and an annotation that does not parse keeps the queue's pods off every node
  (a Warning event on the Queue says why).

Verdicts are worked out once per queue and session over the nodes' group ids (one array
lookup per task); only the resource caps are checked per task, per capped group.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.resources import PODS, ResourceSpace, Vector, counts_as_resource
from caldera.api.task import ALLOCATED_STATUSES, Task
from caldera.framework.intents import Event
from caldera.framework.interfaces import BoolArray, EventHandler, IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.models.volcano import QueueAffinity
from caldera.quantity import QuantityError, to_engine_units

__all__ = ["LIMITS_ANNOTATION", "NODEGROUP_LABEL", "NodeGroupArgs", "NodeGroupPlugin"]

log = logging.getLogger(__name__)

NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
ROOT = "root"
BASE_SCORE = 100.0
MIN_RESOURCE = 0.1
"""Volcano's ``minResource``: an excess smaller than this is rounding, not an excess."""
NOT_SPECIFIED = "node group affinity not specified"
LABEL_NOT_FOUND = "node group label not found"
UNSATISFIED = "node does not satisfy the node group affinity"
LIMITS_INVALID = f"the queue's {LIMITS_ANNOTATION} annotation is invalid"

_warned: set[tuple[str, str]] = set()


class NodeGroupArgs(Args):
    strict: bool = True
    """An unlabelled node is refused even to a queue without affinity."""
    preferred_order: bool = Field(False, alias="enablePreferredOrder")
    """Earlier preferred node groups score higher."""


@dataclass(frozen=True, slots=True)
class Affinity:
    """A queue's node-group terms (Volcano's ``queueGroupAffinity``)."""

    required: frozenset[str]
    preferred: tuple[str, ...]
    anti_required: frozenset[str]
    anti_preferred: frozenset[str]

    @classmethod
    def of(cls, spec: QueueAffinity | None) -> Affinity | None:
        if spec is None:
            return None
        aff, anti = spec.node_group_affinity, spec.node_group_anti_affinity
        return cls(
            required=frozenset(
                aff.required_during_scheduling_ignored_during_execution if aff else ()
            ),
            preferred=tuple(
                dict.fromkeys(
                    aff.preferred_during_scheduling_ignored_during_execution if aff else ()
                )
            ),
            anti_required=frozenset(
                anti.required_during_scheduling_ignored_during_execution if anti else ()
            ),
            anti_preferred=frozenset(
                anti.preferred_during_scheduling_ignored_during_execution if anti else ()
            ),
        )

    @property
    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def allows(self, group: str) -> bool:
        """``queueGroupAffinity.predicate``: anti-affinity's hard terms win over affinity, and a
        soft anti-affinity term still lets the group through."""
        ok = group in self.required or group in self.preferred
        if group in self.anti_required:
            ok = False
        return ok or group in self.anti_preferred

    def score(self, group: str, preferred_order: bool) -> float:
        """``queueGroupAffinity.score``."""
        score = BASE_SCORE if group in self.required else 0.0
        if group in self.preferred:
            n = len(self.preferred)
            rank = (n - self.preferred.index(group)) / n if preferred_order else 1.0
            score += 0.5 * BASE_SCORE * rank
        return -1.0 if group in self.anti_preferred else score


@dataclass(slots=True)
class Limits:
    """A queue's per-group caps (its annotation) and what its placed pods hold per group."""

    caps: dict[str, tuple[Vector, BoolArray]]
    """Group → (cap, the columns the cap names)."""
    held: dict[str, Vector] = field(default_factory=dict)


class InvalidLimits(Exception):
    """The limits annotation cannot be read; the message says where."""


def parse_limits(raw: str, space: ResourceSpace) -> dict[str, tuple[Vector, BoolArray]]:
    """The annotation's caps; InvalidLimits saying what is wrong."""
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidLimits(f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InvalidLimits("must be a JSON object: node group → resource list")
    caps: dict[str, tuple[Vector, BoolArray]] = {}
    for group, resources in data.items():
        if not isinstance(resources, dict):
            raise InvalidLimits(f"{group}: must be a resource list")
        values: dict[str, float] = {}
        for name, quantity in resources.items():
            try:
                values[name] = to_engine_units(name, quantity)
            except QuantityError as exc:
                raise InvalidLimits(f"{group}.{name}: {exc}") from None
        named = np.zeros(len(space), dtype=bool)
        for name in values:
            if counts_as_resource(name) and name != PODS and name in space.index:
                named[space.index[name]] = True
        caps[group] = (space.vector(values), named)
    return caps


class NodeGroupPlugin(Plugin[NodeGroupArgs]):
    name: ClassVar[str] = "nodegroup"
    Args = NodeGroupArgs
    supports_hierarchy: ClassVar[bool] = True

    def on_session_open(self, ssn: SessionView) -> None:
        nodes = ssn.nodes
        ids, count = nodes.topology(NODEGROUP_LABEL)
        groups: list[str] = nodes.derived(
            ("nodegroup names",),
            lambda: sorted({v for v in nodes.label_column(NODEGROUP_LABEL) if v is not None}),
        )
        group_id = {g: i for i, g in enumerate(groups)}
        affinity = self._affinities(ssn.queues)
        limits = self._limits(ssn)
        verdicts: dict[str, list[Rejection]] = {}
        scores: dict[str, Vector] = {}
        everywhere = np.ones(len(nodes), dtype=bool)

        def queue_of(task: Task) -> str:
            job = ssn.jobs.get(task.job)
            return job.queue if job is not None else ""

        def static(queue: str) -> list[Rejection]:
            """The queue's verdicts that do not depend on the task: one reason per node."""
            aff = affinity.get(queue)
            if aff is None or aff.empty:
                reason = [NOT_SPECIFIED] * len(groups)
                reason.append(LABEL_NOT_FOUND if self.args.strict else "")
            else:
                reason = ["" if aff.allows(g) else UNSATISFIED for g in groups]
                reason.append(LABEL_NOT_FOUND)
            by_domain = np.array(reason, dtype=object)[ids]
            return [(r, by_domain == r) for r in sorted(set(reason)) if r]

        def predicate(task: Task) -> list[Rejection]:
            queue = queue_of(task)
            capped = limits.get(queue)
            if isinstance(capped, str):
                return [(LIMITS_INVALID, everywhere)]
            rejections = verdicts.get(queue)
            if rejections is None:
                rejections = verdicts[queue] = static(queue)
            if capped is None:
                return rejections
            out = list(rejections)
            for group, (cap, named) in capped.caps.items():
                if group not in group_id:
                    continue
                held = capped.held.get(group)
                used = task.resreq if held is None else held + task.resreq
                over = named & (used - cap >= MIN_RESOURCE)
                if over.any():
                    names = " ".join(ssn.space.names[i] for i in np.flatnonzero(over))
                    msg = f"nodegroup {group} resource limit exceeded"
                    msg += f", insufficient resources: [{names}]"
                    out.append((msg, ids == group_id[group]))
            return out

        def score(task: Task, rows: IntArray) -> Vector | float:
            queue = queue_of(task)
            aff = affinity.get(queue)
            if aff is None:
                return 0.0
            per_domain = scores.get(queue)
            if per_domain is None:
                order = self.args.preferred_order
                per_domain = scores[queue] = np.array(
                    [aff.score(g, order) for g in groups] + [0.0], dtype=np.float64
                )
            result: Vector = per_domain[ids[rows]]
            return result

        def update(task: Task, sign: float) -> None:
            capped = limits.get(queue_of(task))
            if isinstance(capped, Limits) and task.node >= 0 and ids[task.node] < count:
                group = groups[ids[task.node]]
                held = capped.held.get(group)
                capped.held[group] = (
                    task.resreq * sign if held is None else held + task.resreq * sign
                )

        ssn.predicate_point.add(self.name, predicate)
        ssn.node_order_point.add(self.name, NodeScorer(score, local=True, variant=queue_of))
        if any(isinstance(v, Limits) for v in limits.values()):
            for job in ssn.jobs.values():
                self._count_held(job, update)
            ssn.event_handlers.add(self.name, EventHandler.counting(update))

    def _affinities(self, queues: Mapping[str, Queue]) -> dict[str, Affinity]:
        """Each queue's affinity; with ``enableHierarchy``, inherited from the nearest ancestor
        that has one (Volcano's ``updateAffinityFromAncestor``)."""
        own = {name: a for name, q in queues.items() if (a := Affinity.of(q.affinity)) is not None}
        if not self.option.hierarchy:
            return own
        out = dict(own)
        for name in queues:
            seen = {name}
            at = name
            while name not in out and at != ROOT:
                at = (queues[at].parent or ROOT) if at in queues else ROOT
                if at in seen or at not in queues:
                    break
                seen.add(at)
                if at in own:
                    out[name] = own[at]
        return out

    def _limits(self, ssn: SessionView) -> dict[str, Limits | str]:
        """Each capped queue's caps, or why its annotation is invalid (reported on the Queue)."""
        out: dict[str, Limits | str] = {}
        for name, queue in ssn.queues.items():
            raw = queue.annotations.get(LIMITS_ANNOTATION)
            if not raw:
                continue
            try:
                out[name] = Limits(parse_limits(raw, ssn.space))
            except InvalidLimits as exc:
                problem = f"metadata.annotations[{LIMITS_ANNOTATION!r}]: {exc}"
                out[name] = problem
                if (name, problem) not in _warned:
                    _warned.add((name, problem))
                    log.warning("queue %s: %s; its pods are kept off every node", name, problem)
                ssn.result.events.append(
                    Event("Queue", "", name, "Warning", "InvalidNodeGroupLimits", problem)
                )
        return out

    @staticmethod
    def _count_held(job: Job, update: Any) -> None:
        for status in ALLOCATED_STATUSES:
            for task in job.by_status.get(status, {}).values():
                update(task, 1.0)
