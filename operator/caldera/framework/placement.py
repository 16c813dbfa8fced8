"""Choosing a node for one task: filter every node at once, score the survivors, pick the best.

This is the hot path. For one task it costs a handful of numpy operations over the node table:
the resource fit is one comparison of the task's non-zero request columns against ``idle`` (and,
only when some node has releasing or pipelined resources, ``future_idle``), plugin filters add
rejection masks, and scorers return one vector over the candidates. The best node is the highest
total score; ties go to the node that sorts first by name, so runs are reproducible.

Complexity per task: O(N·k) for N nodes and k requested resources, plus each plugin's own cost.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.fiterror import FitErrors
from caldera.api.node import Matrix
from caldera.api.resources import PODS, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.interfaces import Rejection, SessionView
from caldera.framework.outside import DecisionFailed

__all__ = [
    "RESOURCE_FIT",
    "ByFilter",
    "Choice",
    "Curable",
    "Stage",
    "choose_node",
    "first_accepted",
    "fit_errors",
    "never_fits",
    "node_reasons",
    "plugin_rejections",
    "resource_reason",
    "resource_rejections",
]

BoolArray = npt.NDArray[np.bool_]
NO_READY_NODE = "no node is Ready to take pods"
RESOURCE_FIT = "NodeResourcesFit"
"""The name the resource check goes by (kube-scheduler's filter)."""


def resource_reason(name: str) -> str:
    """kube-scheduler's wording for a resource that does not fit."""
    return "Too many pods" if name == PODS else f"Insufficient {name}"


def resource_rejections(space: ResourceSpace, req: Vector, avail: Matrix) -> list[Rejection]:
    """One rejection per requested resource that some node lacks."""
    out: list[Rejection] = []
    for col in space.fit_columns(req):
        mask = avail[:, col] < req[col]
        if mask.any():
            out.append((resource_reason(space.names[col]), mask))
    return out


def never_fits(ssn: SessionView, task: Task) -> FitErrors | None:
    """Why no node could hold ``task`` even empty (its request exceeds every node's
    allocatable), in kube-scheduler's words; None when some node could. Such a pod's reason is
    this, whatever a queue or the cluster's overcommit budget says."""
    nodes = ssn.nodes
    if not len(nodes):
        return FitErrors(total=0, message=NO_READY_NODE)
    req = task.resreq
    cols = nodes.space.fit_columns(req)
    if _fits(nodes.allocatable, req, cols).any():
        return None
    return fit_errors(
        len(nodes), [(RESOURCE_FIT, resource_rejections(ssn.space, req, nodes.allocatable))]
    )


class ByFilter(list[Rejection]):
    """A plugin's rejections with the filter each came from (``filters``, one name per
    rejection). Volcano runs a plugin's filters in order and stops at the first whose refusal
    evictions cannot cure, and every reason that filter gives counts; a plain list of
    rejections is one filter, named after its plugin."""

    __slots__ = ("filters",)

    def __init__(self) -> None:
        super().__init__()
        self.filters: list[str] = []

    def add(self, name: str, rejections: Sequence[Rejection]) -> None:
        if rejections:  # most filters pass every node: nothing to add
            self.extend(rejections)
            self.filters.extend([name] * len(rejections))

    def copy(self) -> ByFilter:
        out = ByFilter()
        out.extend(self)
        out.filters = list(self.filters)
        return out


Stage = tuple[str, Sequence[Rejection]]
"""A check a task goes through on every node: its name and its rejections."""


def fit_errors(
    total: int,
    stages: Sequence[Stage],
    *,
    curable: Collection[str] = frozenset(),
    within: BoolArray | None = None,
    names: Sequence[str] | None = None,
) -> FitErrors:
    """Why a task fits none of ``total`` nodes, counted as Volcano counts its ``FitErrors``:
    each node once under each reason of the first check that fails it.

    ``stages`` are the checks in Volcano's order (allocate's ``predicate``, then
    ``Session.PredicateFn``): the request against the node's resources (every resource it
    lacks), each filtering plugin in policy order, the first that fails a node being the last
    asked, then the per-node checks (extenders) asked of the nodes that passed all else. Within
    a plugin the filters run in order until one refuses the node for a reason evictions cannot
    cure (not in ``curable``: kube's ``UnschedulableAndUnresolvable``, ``util.ShouldAbort``).
    Nodes outside ``within`` are not counted. With ``names``, the (filter, reason) pairs
    counted against each node are kept as well (``FitErrors.nodes``)."""
    counts: dict[str, int] = {}
    per_node: dict[str, list[tuple[str, str]]] = {}
    done: BoolArray | None = None if within is None else ~within
    for stage, found in stages:
        filters = found.filters if isinstance(found, ByFilter) else [stage] * len(found)
        failed: BoolArray | None = None
        stopped: BoolArray | None = None  # nodes an earlier filter refused for good
        aborting: BoolArray | None = None  # the same, for the filter being counted
        for i, (reason, mask) in enumerate(found):
            if i and filters[i] != filters[i - 1] and aborting is not None:
                stopped = aborting if stopped is None else stopped | aborting
                aborting = None
            hit = mask if done is None else mask & ~done
            if stopped is not None:
                hit = hit & ~stopped
            k = int(np.count_nonzero(hit))
            if not k:
                continue
            counts[reason] = counts.get(reason, 0) + k
            if names is not None:
                for row in np.flatnonzero(hit).tolist():
                    per_node.setdefault(names[row], []).append((filters[i], reason))
            failed = hit if failed is None else failed | hit
            if reason not in curable:
                aborting = hit if aborting is None else aborting | hit
        if failed is not None:
            done = failed if done is None else done | failed
    return FitErrors(total=total, counts=counts, nodes=per_node)


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
    ssn: SessionView, task: Task, *, future: bool = True, within: BoolArray | None = None
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
    plugins = plugin_rejections(ssn, task)
    blocked: BoolArray | None = None if within is None else ~within
    for _, rejections in plugins:
        for _, mask in rejections:
            blocked = mask if blocked is None else (blocked | mask)

    req = task.resreq
    cols = nodes.space.fit_columns(req)
    try:
        fits_idle = _fits(nodes.idle, req, cols)
        if blocked is not None:
            fits_idle &= ~blocked
        nominated = _nominated(ssn, task, blocked, fits_idle, future)
        if nominated is not None:
            return nominated
        refused: Refused = []
        for rows in _shard_first(ssn, fits_idle):
            picked = _pick(ssn, task, rows)
            if isinstance(picked, int):
                return Choice(picked, True)
            refused += picked
        if future and (nodes.releasing.any() or nodes.pipelined.any()):
            fits_future = _fits(nodes.future_idle, req, cols)
            if blocked is not None:
                fits_future &= ~blocked
            for _, row in refused:
                fits_future[row] = False
            for rows in _shard_first(ssn, fits_future):
                more = _pick(ssn, task, rows)
                if isinstance(more, int):
                    return Choice(more, False)
                refused += more
    except DecisionFailed as exc:
        return FitErrors(total=n, message=str(exc))
    avail = nodes.future_idle if future else nodes.idle
    return fit_errors(
        n,
        [
            (RESOURCE_FIT, resource_rejections(ssn.space, req, avail)),
            *plugins,
            (_checker(ssn), _masks(len(nodes), refused)),
        ],
        curable=ssn.releasable_reasons,
        within=within,
        names=nodes.names if task.key == ssn.traced else None,
    )


def _shard_first(ssn: SessionView, mask: BoolArray) -> list[npt.NDArray[np.intp]]:
    """The rows of ``mask`` to try in turn: in soft sharding this scheduler's shard first, then
    the other nodes (Volcano's ``prioritizeNodes``); else all at once."""
    shard = ssn.snapshot.shard
    if shard is None or not shard.soft:
        return [np.flatnonzero(mask)]
    return [np.flatnonzero(mask & shard.rows), np.flatnonzero(mask & ~shard.rows)]


def _checker(ssn: SessionView) -> str:
    """The name the per-node checks go by (the plugins that registered them)."""
    return ", ".join(name for name, _ in ssn.node_check_point.named()) or "node check"


def _nominated(
    ssn: SessionView, task: Task, blocked: BoolArray | None, fits_idle: BoolArray, future: bool
) -> Choice | None:
    """allocate's first try (``allocateResourcesForTasks``): the node an earlier preemption
    nominated the pod to, when the pod fits its future idle resources and passes its filters
    there; None otherwise (every node is then considered)."""
    row = ssn.nodes.index.get(task.nominated) if task.nominated else None
    if row is None or (blocked is not None and blocked[row]):
        return None
    cols = ssn.nodes.space.fit_columns(task.resreq)
    if fits_idle[row]:
        idle = True
    elif future and (ssn.nodes.future_idle[row, cols] >= task.resreq[cols]).all():
        idle = False
    else:
        return None
    if ssn.node_check_point and ssn.node_check(task, row) is not None:
        return None
    return Choice(row, idle)


def plugin_rejections(ssn: SessionView, task: Task) -> list[Stage]:
    """Each filtering plugin's rejections of ``task`` (``Session.predicate``, kept apart by
    plugin, in policy order; a plugin's :class:`ByFilter` stays one)."""
    return [(name, fn(task)) for name, fn in ssn.predicate_point.named()]


Refused = list[tuple[str, int]]
"""(reason, node row) of each candidate a node check refused."""


class Curable(str):
    """A node check's refusal that evicting pods may cure (Volcano's status code
    ``Unschedulable``): victim searches still try the node. They pass over a node refused any
    other way, as Volcano's ``Session.PredicateForPreemptAction`` does (it keeps only nodes
    whose statuses are neither ``UnschedulableAndUnresolvable`` nor ``Error``, ``Skip`` or
    ``Wait``, ``StatusSets.ContainsErrorSkipOrWait``)."""

    __slots__ = ()


def _pick(ssn: SessionView, task: Task, candidates: npt.NDArray[np.intp]) -> int | Refused:
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
    ssn: SessionView, task: Task, rows: npt.NDArray[np.intp], *, first: int | None = None
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


def node_reasons(ssn: SessionView, task: Task) -> FitErrors:
    """Every node's refusal of ``task``, counted as :func:`choose_node` counts it when no node
    fits (``caldera explain``'s table): the request against future idle resources, the
    plugins' filters, and the per-node checks asked of the nodes that pass the rest. Nodes
    ``task`` fits have no entry in ``nodes``."""
    nodes = ssn.nodes
    resources = resource_rejections(ssn.space, task.resreq, nodes.future_idle)
    plugins = plugin_rejections(ssn, task)
    blocked = np.zeros(len(nodes), dtype=np.bool_)
    for _, mask in [*resources, *(r for _, found in plugins for r in found)]:
        blocked |= mask
    refused: Refused = []
    if ssn.node_check_point:
        for row in np.flatnonzero(~blocked).tolist():
            if (why := ssn.node_check(task, row)) is not None:
                refused.append((why, row))
    stages = [(RESOURCE_FIT, resources), *plugins, (_checker(ssn), _masks(len(nodes), refused))]
    return fit_errors(len(nodes), stages, curable=ssn.releasable_reasons, names=nodes.names)
