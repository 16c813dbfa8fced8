"""network-topology-aware: score HyperNodes for gangs, and nodes by the HyperNodes they are in.

Volcano's plugin of the same name (volcano.md §3.4), with its arguments. The search that keeps a
gang inside one HyperNode is the allocate action's (:mod:`caldera.framework.topology`); this plugin
tells it which HyperNode of a tier to try first and scores nodes:

- **HyperNode order** (a job with ``networkTopology``): the binpack fill of the HyperNode's summed
  resources once the job's pending tasks are added, ``(used + request) / allocatable`` weighted by
  ``hypernode.binpack.*`` (0 when the job would overflow it); when several HyperNodes share the
  best fill, the share of the job's tasks already inside each breaks the tie. Scaled by
  100 × ``weight``.
- **Node order, job with network topology**: once some of its tasks are placed, a node scores
  ``(max tier − t) / (max tier − min tier)`` for the lowest tier ``t`` at which it shares a
  HyperNode with all of them, so a gang fills one leaf before spilling into the next.
- **Node order, other pods** (``hypernode.binpack.normal-pod.enable``): the mean over tiers,
  weighted ``fading^(tier − 1)``, of the binpack fill of the node's HyperNode at that tier (1 where
  the node is in none), so ordinary pods pack into already busy domains and leave whole leaves
  free for gangs.

``hypernode.gradient.evict.max-hypernodes`` is accepted for Volcano's gang preemption and has no
effect here: preemption does not search HyperNodes.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.hypernode import HyperNodeTree, HyperNodeUsage
from caldera.api.job import Job
from caldera.api.resources import Vector
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import IntArray, SessionView
from caldera.framework.plugin import Plugin
from caldera.framework.scoring import NodeScorer
from caldera.plugins.binpack import MAX_NODE_SCORE, fill, weights_args

__all__ = ["NetworkTopologyArgs", "NetworkTopologyPlugin"]


class NetworkTopologyArgs(weights_args("hypernode.binpack.")):  # type: ignore[misc]
    weight: int = Field(1, ge=0)
    normal_pod_enable: bool = Field(True, alias="hypernode.binpack.normal-pod.enable")
    normal_pod_fading: float = Field(0.8, alias="hypernode.binpack.normal-pod.fading", ge=0)
    evict_max_hypernodes: int = Field(8, alias="hypernode.gradient.evict.max-hypernodes", ge=1)


class NetworkTopologyPlugin(Plugin[NetworkTopologyArgs]):
    name: ClassVar[str] = "network-topology-aware"
    Args = NetworkTopologyArgs
    tree: HyperNodeTree
    usage: HyperNodeUsage
    ssn: SessionView

    def on_session_open(self, ssn: SessionView) -> None:
        tree, usage = ssn.hypernodes, ssn.hypernode_usage
        if tree is None or usage is None or not len(tree) or self.args.weight == 0:
            return
        self.tree, self.usage, self.ssn = tree, usage, ssn
        self.cols = [
            (ssn.space.index[r], float(w))
            for r, w in self.args.weights().items()
            if r in ssn.space.index and w > 0
        ]
        self.scale = MAX_NODE_SCORE * self.args.weight
        tiers = tree.tiers
        self.min_tier, self.max_tier = tiers[0], tiers[-1]
        ssn.hypernode_order_point.add(self.name, self._hypernode_order)
        ssn.node_order_point.add(self.name, NodeScorer(self._node_order))

    # -- HyperNodes ----------------------------------------------------------------------------

    def _hypernode_order(self, job: Job, pool: IntArray) -> Vector:
        pending = job.tasks_in(TaskStatus.PENDING)
        request = sum((t.resreq for t in pending), self.ssn.space.zeros())
        used = self.usage.used()
        score, overflow = fill(self.usage.allocatable[pool], used[pool], request, self.cols)
        score[overflow] = 0.0
        best = score.max() if len(score) else 0.0
        tied = np.flatnonzero(score == best)
        if len(tied) > 1 and job.tasks:
            rows = np.array([t.node for t in job.tasks.values() if t.node >= 0], dtype=np.intp)
            if len(rows):
                dom = self.tree.domain[int(self.tree.tier[pool[0]])]
                inside = np.bincount(dom[rows][dom[rows] >= 0], minlength=len(self.tree))
                score[tied] += inside[pool[tied]] / len(job.tasks)
        out: Vector = score * self.scale
        return out

    # -- nodes ---------------------------------------------------------------------------------

    def _node_order(self, task: Task, idx: IntArray) -> Vector | float:
        job = self.ssn.jobs.get(task.job)
        if job is not None and job.network_topology is not None:
            return self._near_the_job(job, idx)
        if not self.args.normal_pod_enable:
            return 0.0
        return self._normal_pod(task, idx)

    def _near_the_job(self, job: Job, idx: IntArray) -> Vector | float:
        rows = job.node_rows()
        if not len(rows):
            return 0.0
        tree = self.tree
        score = np.zeros(len(idx))
        unset = np.ones(len(idx), dtype=bool)
        span = self.max_tier - self.min_tier
        for tier in tree.tiers:
            holder = tree.holding(rows, tier)
            if holder < 0:
                continue
            hit = unset & (tree.domain[tier][idx] == holder)
            score[hit] = 1.0 if span == 0 else (self.max_tier - tier) / span
            unset &= ~hit
        out: Vector = score * self.scale
        return out

    def _normal_pod(self, task: Task, idx: IntArray) -> Vector:
        tree = self.tree
        per_hn, overflow = fill(self.usage.allocatable, self.usage.used(), task.resreq, self.cols)
        per_hn[overflow] = 0.0
        total = np.zeros(len(idx))
        weight_sum = 0.0
        for tier in range(self.min_tier, self.max_tier + 1):
            weight = self.args.normal_pod_fading ** (tier - 1)
            weight_sum += weight
            dom = tree.domain.get(tier)
            if dom is None:
                total += weight
                continue
            d = dom[idx]
            total += weight * np.where(d >= 0, per_hn[np.maximum(d, 0)], 1.0)
        out: Vector = total / weight_sum * self.scale if weight_sum > 0 else total
        return out
