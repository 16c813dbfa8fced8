"""Choosing a node for one task: filter every node at once, score the survivors, pick the best.

This is the hot path. For one task it costs a handful of numpy operations over the node table:
the resource fit is one comparison of the task's non-zero request columns against ``idle`` (and,
only when some node has releasing or pipelined resources, ``future_idle``), plugin filters add
rejection masks, and scorers return one vector over the candidates. The best node is the highest
total score; ties go to the node that sorts first by name, so runs are reproducible.

Complexity per task: O(N·k) for N nodes and k requested resources, plus each plugin's own cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.fiterror import FitErrors
from caldera.api.node import Matrix
from caldera.api.resources import PODS, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.outside import DecisionFailed
from caldera.framework.session import Rejection, Session

__all__ = [
    "Choice",
    "Curable",
    "choose_node",
    "first_accepted",
    "never_fits",
    "resource_reason",
    "resource_rejections",
]

BoolArray = npt.NDArray[np.bool_]
NO_READY_NODE = "no node is Ready to take pods"


def resource_reason(name: str) -> str:
    """kube-scheduler's wording for a resource that does not fit."""
    return "Too many pods" if name == PODS else f"Insufficient {name}"


def resource_rejections(space: ResourceSpace, req: Vector, avail: Matrix) -> list[Rejection]:
    """One rejection per requested resource that some node lacks."""
    out: list[Rejection] = []
    for col in np.flatnonzero(req):
        mask = avail[:, col] < req[col]
        if mask.any():
            out.append((resource_reason(space.names[col]), mask))
    return out


def never_fits(ssn: Session, task: Task) -> FitErrors | None:
    """Why no node could hold ``task`` even empty (its request exceeds every node's
    allocatable), in kube-scheduler's words; None when some node could. Such a pod's reason is
    this, whatever a queue or the cluster's overcommit budget says."""
    nodes = ssn.nodes
    if not len(nodes):
        return FitErrors(total=0, message=NO_READY_NODE)
    req = task.resreq
    cols = np.flatnonzero(req)
    if _fits(nodes.allocatable, req, cols).any():
        return None
    return fit_errors(len(nodes), resource_rejections(ssn.space, req, nodes.allocatable))


def fit_errors(total: int, rejections: list[Rejection]) -> FitErrors:
    counts: dict[str, int] = {}
    for reason, mask in rejections:
        counts[reason] = counts.get(reason, 0) + int(np.count_nonzero(mask))
    return FitErrors(total=total, counts=counts)


@dataclass(frozen=True, slots=True)
class Choice:
    node: int
    idle: bool
    """True when the task fits the node's idle resources now (allocate), False when only after
    releasing resources come back (pipeline)."""


def _fits(avail: Matrix, req: Vector, cols: npt.NDArray[np.intp]) -> BoolArray:
    if len(cols) == 1:
        c = int(cols[0])
        return np.asarray(avail[:, c] >= req[c], dtype=np.bool_)
    return np.asarray((avail[:, cols] >= req[cols]).all(axis=1), dtype=np.bool_)


def choose_node(
    ssn: Session, task: Task, *, future: bool = True, within: BoolArray | None = None
) -> Choice | FitErrors:
    """The best node for ``task``, or why there is none.

    With ``future`` the task may also be pipelined onto resources that evicted tasks will free.
    ``within`` limits the choice (and the reasons) to the masked nodes (one HyperNode).
    A scorer or node check that cannot decide (:class:`DecisionFailed`) leaves the task without
    a node, its message the reason.
    """
    nodes = ssn.nodes
    if not len(nodes):
        return FitErrors(total=0, message=NO_READY_NODE)
    n = len(nodes) if within is None else int(np.count_nonzero(within))
    message = ssn.pre_predicate(task)
    if message is not None:
        return FitErrors(total=n, message=message)
    rejections = ssn.predicate(task)
    blocked: BoolArray | None = None if within is None else ~within
    for _, mask in rejections:
        blocked = mask if blocked is None else (blocked | mask)

    req = task.resreq
    cols = np.flatnonzero(req)
    try:
        fits_idle = _fits(nodes.idle, req, cols)
        if blocked is not None:
            fits_idle &= ~blocked
        picked = _pick(ssn, task, np.flatnonzero(fits_idle))
        if isinstance(picked, int):
            return Choice(picked, True)
        refused = picked
        if future and (nodes.releasing.any() or nodes.pipelined.any()):
            fits_future = _fits(nodes.future_idle, req, cols)
            if blocked is not None:
                fits_future &= ~blocked
            for _, row in refused:
                fits_future[row] = False
            more = _pick(ssn, task, np.flatnonzero(fits_future))
            if isinstance(more, int):
                return Choice(more, False)
            refused += more
    except DecisionFailed as exc:
        return FitErrors(total=n, message=str(exc))
    avail = nodes.future_idle if future else nodes.idle
    found = rejections + resource_rejections(ssn.space, req, avail) + _masks(len(nodes), refused)
    if within is not None:  # the reasons of the nodes that were in the running only
        found = [(reason, mask & within) for reason, mask in found]
    return fit_errors(n, found)


Refused = list[tuple[str, int]]
"""(reason, node row) of each candidate a node check refused."""


class Curable(str):
    """A node check's refusal that evicting pods may cure (Volcano's status code
    ``Unschedulable``): victim searches still try the node. They pass over a node refused any
    other way, as Volcano's ``Session.PredicateForPreemptAction`` does (it keeps only nodes
    whose statuses are neither ``UnschedulableAndUnresolvable`` nor ``Error``, ``Skip`` or
    ``Wait``, ``StatusSets.ContainsErrorSkipOrWait``)."""

    __slots__ = ()


def _pick(ssn: Session, task: Task, candidates: npt.NDArray[np.intp]) -> int | Refused:
    """The best of ``candidates`` (by score, or a plugin's best-node choice) that every node
    check accepts; or, when none does, why each was refused."""
    if not len(candidates):
        return []
    checks = bool(ssn.node_check_point)
    if len(candidates) == 1 and not checks:
        return int(candidates[0])
    scores = ssn.node_order(task, candidates) if len(candidates) > 1 else np.zeros(1)
    best = ssn.best_node(task, candidates, scores) if len(candidates) > 1 else None
    if not checks:
        return best if best is not None else int(candidates[int(np.argmax(scores))])
    return first_accepted(ssn, task, candidates[np.argsort(-scores, kind="stable")], first=best)


def first_accepted(
    ssn: Session, task: Task, rows: npt.NDArray[np.intp], *, first: int | None = None
) -> int | Refused:
    """The first of ``rows`` (``first`` before the others) every node check accepts, asking
    one node at a time; or why each was refused. Checks are asked lazily because each answer
    may cost a round trip (an extender): the best node usually passes at the first question."""
    order = rows.tolist()
    if first is not None:
        order = [first, *(r for r in order if r != first)]
    refused: Refused = []
    for row in order:
        why = ssn.node_check(task, row)
        if why is None:
            return int(row)
        refused.append((why, int(row)))
    return refused


def _masks(n: int, refused: Refused) -> list[Rejection]:
    by_reason: dict[str, BoolArray] = {}
    for why, row in refused:
        mask = by_reason.get(why)
        if mask is None:
            mask = by_reason[why] = np.zeros(n, dtype=np.bool_)
        mask[row] = True
    return list(by_reason.items())
