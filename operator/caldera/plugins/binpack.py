"""binpack: prefer the nodes the task leaves fullest, weighted per resource.

For each resource the task requests and that has a weight, a node scores
``(used + request) / allocatable × weight``; the weighted mean is scaled to 0–100 and multiplied by
``binpack.weight``. A node the task would overflow scores 0. Vectorised over the candidates.

The fill ratio (:func:`fill`) and the open-ended ``<prefix><resource>: <weight>`` arguments
(:func:`prefixed_weights`, :func:`resource_weights`) are shared with the network-topology-aware
plugin, which scores HyperNodes with the same formula over their summed resources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import Field, create_model, model_validator

from caldera.api.node import Matrix
from caldera.api.resources import CPU, MEMORY, Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.rowwise import COLUMNS, Math, Num, evaluate
from caldera.framework.scoring import NodeScorer

__all__ = ["BinpackArgs", "BinpackPlugin", "fill", "weights_args"]

MAX_NODE_SCORE = 100.0


def prefixed_weights(data: Any, prefix: str) -> Any:
    """Argument data with the open-ended ``<prefix><name>: <weight>`` keys gathered into one
    ``<prefix>*`` map (each weight a non-negative integer)."""
    if not isinstance(data, dict):
        return data
    out = {k: v for k, v in data.items() if not k.startswith(prefix)}
    weights = {}
    for key, value in data.items():
        if key.startswith(prefix):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key} must be a non-negative integer, not {value!r}")
            weights[key[len(prefix) :]] = value
    out[f"{prefix}*"] = weights
    return out


def resource_weights(listed: str, given: dict[str, int], cpu: int, memory: int) -> dict[str, int]:
    """Resource → weight: the ``listed`` extended resources (weight 1 unless ``given``), then cpu
    and memory (set last, so listing them changes nothing, as in Volcano)."""
    out: dict[str, int] = {}
    for name in (n.strip() for n in listed.split(",")):
        if name:
            out[name] = given.get(name, 1)
    out[CPU] = cpu
    out[MEMORY] = memory
    return out


def fill(
    alloc: Matrix, used: Matrix, req: Vector, cols: Sequence[tuple[int, float]]
) -> tuple[Vector, npt.NDArray[np.bool_]]:
    """Per row, the weighted mean over requested ``cols`` of ``(used + req) / allocatable``
    (0–1), and whether ``req`` would overflow the row."""
    total, overflow = _fill(COLUMNS, alloc.T, used.T, req, cols)
    if isinstance(total, float):  # no weighted resource requested: still plain numbers
        return np.zeros(len(alloc), dtype=np.float64), np.zeros(len(alloc), dtype=bool)
    return total, overflow


def _fill(
    m: Math, alloc: Any, used: Any, req: Any, cols: Sequence[tuple[int, float]]
) -> tuple[Num, Num]:
    """:func:`fill` on one row (``alloc``/``used``: its values) or on columns (``alloc``/``used``:
    one column per resource)."""
    total: Num = 0.0
    overflow: Num = False
    weight_sum = 0.0
    for col, weight in cols:
        r = req[col]
        if r == 0:
            continue
        a = alloc[col]
        final = used[col] + r
        overflow = overflow | (final > a)
        total = total + m.where(a > 0, final * weight / m.where(a > 0, a, 1), 0)
        weight_sum += weight
    if weight_sum:
        total = total / weight_sum
    return total, overflow


class _Weights(Args):
    """Per-resource binpack weights; :func:`weights_args` names the keys."""

    prefix: ClassVar[str] = ""
    cpu: int = 1
    memory: int = 1
    resources: str = ""
    resource_weights: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect(cls, data: Any) -> Any:
        return prefixed_weights(data, f"{cls.prefix}resources.")

    def weights(self) -> dict[str, int]:
        return resource_weights(self.resources, self.resource_weights, self.cpu, self.memory)


def weights_args(prefix: str) -> type[_Weights]:
    """An argument model with binpack's weight keys under ``prefix``: ``<prefix>cpu``,
    ``<prefix>memory``, ``<prefix>resources`` and ``<prefix>resources.<name>`` (binpack and
    the network-topology-aware plugin's HyperNode binpack use the same four)."""
    model = create_model(
        f"Weights[{prefix}]",
        __base__=_Weights,
        cpu=(int, Field(1, alias=f"{prefix}cpu", ge=0)),
        memory=(int, Field(1, alias=f"{prefix}memory", ge=0)),
        resources=(str, Field("", alias=f"{prefix}resources")),
        resource_weights=(
            dict[str, int],
            Field(default_factory=dict, alias=f"{prefix}resources.*"),
        ),
    )
    model.prefix = prefix
    return model


class BinpackArgs(weights_args("binpack.")):  # type: ignore[misc]
    weight: int = Field(1, alias="binpack.weight", ge=0)


class BinpackPlugin(Plugin[BinpackArgs]):
    name: ClassVar[str] = "binpack"
    Args = BinpackArgs

    def on_session_open(self, ssn: SessionView) -> None:
        if self.args.weight == 0:
            return
        nodes = ssn.nodes
        cols = [
            (ssn.space.index[r], float(w))
            for r, w in self.args.weights().items()
            if r in ssn.space.index and w > 0
        ]
        scale = MAX_NODE_SCORE * self.args.weight
        width = len(ssn.space)

        def formula(m: Math, *values: Num) -> Num:
            """The task's request, then the node's allocatable and used (``width`` each)."""
            req, alloc, used = values[:width], values[width : 2 * width], values[2 * width :]
            total, overflow = _fill(m, alloc, used, req, cols)
            return m.where(overflow, 0.0, total * scale)

        def score(task: Task, idx: IntArray) -> Vector:
            request = tuple(task.resreq.tolist())
            return evaluate(formula, idx, nodes.allocatable, nodes.used, args=request)

        ssn.node_order_point.add(self.name, NodeScorer(score, local=True))
