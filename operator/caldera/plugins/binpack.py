"""binpack: prefer the nodes the task leaves fullest, weighted per resource.

For each resource the task requests and that has a weight, a node scores
``(used + request) / allocatable × weight``; the weighted mean is scaled to 0–100 and multiplied by
``binpack.weight``. A node the task would overflow scores 0. Vectorised over the candidates.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import Field, model_validator

from caldera.api.resources import CPU, MEMORY, Vector
from caldera.api.task import Task
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.framework.session import IntArray, Session

__all__ = ["BinpackArgs", "BinpackPlugin"]

MAX_NODE_SCORE = 100.0
_PREFIX = "binpack.resources."


class BinpackArgs(Args):
    weight: int = Field(1, alias="binpack.weight", ge=0)
    cpu: int = Field(1, alias="binpack.cpu", ge=0)
    memory: int = Field(1, alias="binpack.memory", ge=0)
    resources: str = Field("", alias="binpack.resources")
    resource_weights: dict[str, int] = Field(default_factory=dict, alias="binpack.resources.*")

    @model_validator(mode="before")
    @classmethod
    def _collect(cls, data: Any) -> Any:
        """Gather the open-ended ``binpack.resources.<name>: <weight>`` keys."""
        if not isinstance(data, dict):
            return data
        out = {k: v for k, v in data.items() if not k.startswith(_PREFIX)}
        weights = {}
        for key, value in data.items():
            if key.startswith(_PREFIX):
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{key} must be a non-negative integer, not {value!r}")
                weights[key[len(_PREFIX) :]] = value
        out["binpack.resources.*"] = weights
        return out

    def weights(self) -> dict[str, int]:
        """Resource → weight: the listed extended resources (weight 1 unless given), then cpu and
        memory with ``binpack.cpu``/``binpack.memory`` (set last, so listing them changes
        nothing, as in Volcano)."""
        out: dict[str, int] = {}
        for name in (n.strip() for n in self.resources.split(",")):
            if name:
                out[name] = self.resource_weights.get(name, 1)
        out[CPU] = self.cpu
        out[MEMORY] = self.memory
        return out


class BinpackPlugin(Plugin[BinpackArgs]):
    name: ClassVar[str] = "binpack"
    Args = BinpackArgs

    def on_session_open(self, ssn: Session) -> None:
        if self.args.weight == 0:
            return
        nodes = ssn.nodes
        cols = [
            (ssn.space.index[r], float(w))
            for r, w in self.args.weights().items()
            if r in ssn.space.index and w > 0
        ]
        scale = MAX_NODE_SCORE * self.args.weight

        def score(task: Task, idx: IntArray) -> Vector:
            total = np.zeros(len(idx), dtype=np.float64)
            overflow = np.zeros(len(idx), dtype=bool)
            weight_sum = 0.0
            for col, weight in cols:
                req = task.resreq[col]
                if req == 0:
                    continue
                alloc = nodes.allocatable[idx, col]
                final = nodes.used[idx, col] + req
                overflow |= final > alloc
                with np.errstate(divide="ignore", invalid="ignore"):
                    total += np.where(alloc > 0, final * weight / np.where(alloc > 0, alloc, 1), 0)
                weight_sum += weight
            if weight_sum == 0:
                return total
            total = total / weight_sum * scale
            total[overflow] = 0.0
            return total

        ssn.node_order_point.add(self.name, NodeScorer(score, local=True))
