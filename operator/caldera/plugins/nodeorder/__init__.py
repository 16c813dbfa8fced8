"""nodeorder: kube-scheduler's node scorers with Volcano's weight keys.

Every scorer returns kube-scheduler's 0–100 integer score for each candidate node, and the plugin
sums them times their weights. A weight of 0 turns a scorer off. Scorers are of two kinds, as in
Volcano:

- **per node** (least requested, most requested, balanced resource, node affinity, image
  locality): a node's score depends only on that node and the pod, and is not normalised across
  nodes. The resource scorers depend on the node's accounting, so the session caches them per
  pod request and refreshes only nodes that changed (:mod:`caldera.framework.scoring`); node
  affinity and image locality depend on labels and images that do not change in a session, so
  they cache a whole-cluster vector per distinct pod term list or image list instead (and are
  registered outside the request cache, whose key knows only the request);
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
from caldera.framework.interfaces import IntArray, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.plugins.nodeorder import affinity, images, interpod, resources, spread, taints

__all__ = ["NamedScorer", "NodeOrderArgs", "NodeOrderPlugin", "per_row"]


class NodeOrderArgs(Args):
    least_requested: int = Field(1, alias="leastrequested.weight", ge=0)
    most_requested: int = Field(0, alias="mostrequested.weight", ge=0)
    balanced_resource: int = Field(1, alias="balancedresource.weight", ge=0)
    node_affinity: int = Field(2, alias="nodeaffinity.weight", ge=0)
    pod_affinity: int = Field(2, alias="podaffinity.weight", ge=0)
    taint_toleration: int = Field(3, alias="tainttoleration.weight", ge=0)
    image_locality: int = Field(1, alias="imagelocality.weight", ge=0)
    pod_topology_spread: int = Field(2, alias="podtopologyspread.weight", ge=0)


Scorer = Callable[[Task, IntArray], Vector | float]
"""0–100 scores of the task on the candidate rows; one number when every row scores the same
(the scorer has nothing to say about this pod), so the sum need not build a vector for it."""


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

    def build_scorers(self, ssn: SessionView) -> list[NamedScorer]:
        """The weighted scorers; those with weight 0 are not built at all."""
        table, space, a = ssn.nodes, ssn.space, self.args
        # (name as its weight key spells it, weight, per-node, how to build it)
        candidates: list[tuple[str, int, bool, Callable[[], Scorer]]] = [
            ("leastrequested", a.least_requested, True, lambda: resources.least_requested(table)),
            ("mostrequested", a.most_requested, True, lambda: resources.most_requested(table)),
            (
                "balancedresource",
                a.balanced_resource,
                True,
                lambda: resources.balanced_resource(table, space),
            ),
            ("nodeaffinity", a.node_affinity, False, lambda: affinity.node_affinity(table)),
            ("imagelocality", a.image_locality, False, lambda: images.image_locality(table)),
            ("podaffinity", a.pod_affinity, False, lambda: interpod.pod_affinity_scorer(ssn)),
            ("tainttoleration", a.taint_toleration, False, lambda: taints.taint_toleration(table)),
            (
                "podtopologyspread",
                a.pod_topology_spread,
                False,
                lambda: spread.pod_topology_spread(ssn, self.name),
            ),
        ]
        return [NamedScorer(name, build(), w, local) for name, w, local, build in candidates if w]

    def on_session_open(self, ssn: SessionView) -> None:
        self.scorers = self.build_scorers(ssn)
        for local in (True, False):
            group = [(s.fn, float(s.weight)) for s in self.scorers if s.local is local]
            if group:
                ssn.node_order_point.add(self.name, NodeScorer(_summed(group), local=local))


def per_row(value: Vector | float, rows: int) -> Vector:
    """A scorer's answer as one score per candidate row (a plain number applies to every row)."""
    out: Vector = np.broadcast_to(np.asarray(value, dtype=np.float64), (rows,)).copy()
    return out


def _summed(weighted: list[tuple[Scorer, float]]) -> Callable[[Task, IntArray], Vector | float]:
    def score(task: Task, idx: IntArray) -> Vector | float:
        total: Vector | float = 0.0
        for scorer, weight in weighted:
            value = scorer(task, idx)
            total = total + (value if weight == 1.0 else value * weight)
        return total

    return score
