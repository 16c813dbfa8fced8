"""nodeorder: kube-scheduler's node scorers with Volcano's weight keys.

Each scorer is a function over the candidate nodes returning kube-scheduler's 0–100 integer score;
the plugin sums them times their weights. A weight of 0 turns a scorer off. This issue ships the
resource scorers (least requested, most requested, balanced resource); the affinity, taint,
image-locality and topology-spread scorers accept their weights now and are added by later work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.framework.session import IntArray, Session
from caldera.plugins.nodeorder import resources

__all__ = ["NodeOrderArgs", "NodeOrderPlugin"]


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


class NodeOrderPlugin(Plugin[NodeOrderArgs]):
    name: ClassVar[str] = "nodeorder"
    Args = NodeOrderArgs

    def on_session_open(self, ssn: Session) -> None:
        table = ssn.nodes
        space = ssn.space
        weighted: list[tuple[Scorer, float]] = [
            (scorer, float(weight))
            for scorer, weight in (
                (resources.least_requested(table), self.args.least_requested),
                (resources.most_requested(table), self.args.most_requested),
                (resources.balanced_resource(table, space), self.args.balanced_resource),
            )
            if weight
        ]
        if not weighted:
            return

        def score(task: Task, idx: IntArray) -> Vector:
            total = np.zeros(len(idx), dtype=np.float64)
            for scorer, weight in weighted:
                total += scorer(task, idx) * weight
            return total

        ssn.node_order_point.add(self.name, NodeScorer(score, local=True))
