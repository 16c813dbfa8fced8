"""nodeorder: kube-scheduler's node scorers with Volcano's weight keys.

Every scorer returns kube-scheduler's 0–100 integer score for each candidate node, and the plugin
sums them times their weights. A weight of 0 turns a scorer off. Scorers are of two kinds, as in
Volcano:

- **per node** (least requested, most requested, balanced resource, node affinity, image
  locality): a node's score depends only on that node and the pod, so the session caches it per
  pod request and refreshes only nodes that changed (:mod:`caldera.framework.scoring`);
- **batch** (inter-pod affinity, taint toleration, topology spread): scores are normalised over
  the candidate nodes together (kube's NormalizeScore), so they are computed per task over all
  candidates at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.framework.session import IntArray, Session
from caldera.plugins.nodeorder import resources

__all__ = ["NamedScorer", "NodeOrderArgs", "NodeOrderPlugin"]


class NodeOrderArgs(Args):
    least_requested: int = Field(1, alias="leastrequested.weight", ge=0)
    most_requested: int = Field(0, alias="mostrequested.weight", ge=0)
    balanced_resource: int = Field(1, alias="balancedresource.weight", ge=0)
    node_affinity: int = Field(2, alias="nodeaffinity.weight", ge=0)
    pod_affinity: int = Field(2, alias="podaffinity.weight", ge=0)
    taint_toleration: int = Field(3, alias="tainttoleration.weight", ge=0)
    image_locality: int = Field(1, alias="imagelocality.weight", ge=0)
    pod_topology_spread: int = Field(2, alias="podtopologyspread.weight", ge=0)


Scorer = Callable[[Task, IntArray], Vector]


@dataclass(frozen=True, slots=True)
class NamedScorer:
    name: str
    """The scorer's name as its weight key spells it (``leastrequested``...)."""
    fn: Scorer
    weight: int
    local: bool
    """Per-node scorer (cacheable per request) rather than a batch scorer."""


class NodeOrderPlugin(Plugin[NodeOrderArgs]):
    name: ClassVar[str] = "nodeorder"
    Args = NodeOrderArgs

    def build_scorers(self, ssn: Session) -> list[NamedScorer]:
        """The weighted scorers; those with weight 0 are left out."""
        table, space, a = ssn.nodes, ssn.space, self.args
        candidates = [
            NamedScorer(
                "LeastAllocated", resources.least_requested(table), a.least_requested, True
            ),
            NamedScorer("MostAllocated", resources.most_requested(table), a.most_requested, True),
            NamedScorer(
                "BalancedAllocation",
                resources.balanced_resource(table, space),
                a.balanced_resource,
                True,
            ),
        ]
        return [s for s in candidates if s.weight]

    def on_session_open(self, ssn: Session) -> None:
        self.scorers = self.build_scorers(ssn)
        for local in (True, False):
            group = [(s.fn, float(s.weight)) for s in self.scorers if s.local is local]
            if group:
                ssn.node_order_point.add(self.name, NodeScorer(_summed(group), local=local))


def _summed(weighted: list[tuple[Scorer, float]]) -> Scorer:
    def score(task: Task, idx: IntArray) -> Vector:
        total = np.zeros(len(idx), dtype=np.float64)
        for scorer, weight in weighted:
            total += scorer(task, idx) * weight
        return total

    return score
