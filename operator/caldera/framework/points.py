"""Extension points and the rules that combine plugin answers across tiers.

Volcano hand-writes one tier loop per extension point (37 near-copies). Here an extension point is
a :class:`Point`: plugins register functions into it, the policy's tier layout and per-plugin
``enableXxx: false`` opt-outs decide which registrations count, and each combining rule is one
function below, used by every point of its kind:

=====================  =====================================================================
rule                   points
=====================  =====================================================================
:func:`first_nonzero`  job, queue and task order (via :class:`OrderPoint`)
:func:`all_true`       job ready, allocatable, preemptive
:func:`any_true`       overused
:func:`vote`           job pipelined, job enqueueable (reject wins; a permit decides its tier)
:func:`first_tier`     job starving (the first tier with functions decides; all must agree)
:func:`first_result`   job valid, pre-predicate, node check (the first failure is the answer)
:func:`intersection`   preemptable, reclaimable (per tier; the first non-empty tier wins)
:func:`union`          victim tasks (per tier; the first non-empty tier wins)
:func:`concat`         predicate (every rejection from every plugin is kept)
:class:`~caldera.framework.scoring.ScoreCache`  node order (sum of weighted score vectors)
:func:`call_all`       job enqueued (notification)
=====================  =====================================================================
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

__all__ = [
    "ABSTAIN",
    "JOINT_POINTS",
    "PERMIT",
    "POINT_FLAGS",
    "REJECT",
    "Among",
    "OrderPoint",
    "Point",
    "SimulatePoint",
    "all_true",
    "any_true",
    "call_all",
    "concat",
    "first_nonzero",
    "first_result",
    "first_tier",
    "intersection",
    "switched_off",
    "union",
    "vote",
]

F = TypeVar("F")
T = TypeVar("T")
R = TypeVar("R")

PERMIT = 1
ABSTAIN = 0
REJECT = -1

POINT_FLAGS: dict[str, tuple[str, ...]] = {
    "enableJobOrder": ("job_order",),
    "enableJobReady": ("job_ready",),
    "enableJobPipelined": ("job_pipelined",),
    "enableTaskOrder": ("task_order",),
    "enablePreemptable": ("preemptable",),
    "enableReclaimable": ("reclaimable",),
    "enablePreemptive": ("preemptive",),
    "enableQueueOrder": ("queue_order",),
    "enabledClusterOrder": ("cluster_order",),
    "enablePredicate": ("predicate", "pre_predicate", "simulate_predicate", "node_check"),
    "enableBestNode": ("best_node",),
    "enableNodeOrder": ("node_order",),
    "enableTargetJob": ("target_job",),
    "enableReservedNodes": ("reserved_nodes",),
    "enableJobEnqueued": ("job_enqueueable", "job_enqueued"),
    "enabledVictim": ("victim_tasks", "victim_filter"),
    "enableJobStarving": ("job_starving",),
    "enabledOverused": ("overused",),
    "enabledAllocatable": ("allocatable",),
    "enabledHyperNodeOrder": ("hypernode_order",),
    "enabledSubJobReady": ("subjob_ready",),
    "enabledSubJobPipelined": ("subjob_pipelined",),
    "enabledSubJobOrder": ("subjob_order",),
    "enabledHyperNodeGradient": ("hypernode_gradient",),
}
"""Volcano's per-plugin option keys (note its mixed ``enable``/``enabled`` prefixes) and the
points each one switches. Absent means on. Job valid, event handlers and PreBind have no switch."""

JOINT_POINTS: dict[str, tuple[str, ...]] = {"simulate_change": ("preemptable", "allocatable")}
"""Points with no flag of their own, off only where every point named is off. Volcano's
``Session.SimulateRemoveTaskFn`` and ``SimulateAddTaskFn`` (framework/session_plugins.go) skip a
plugin that has neither ``enablePreemptable`` nor ``enabledAllocatable``."""


def switched_off(flagged: set[str]) -> frozenset[str]:
    """The points off for a plugin whose ``false`` flags switched off ``flagged``, the joint
    points whose every part is off included."""
    joint = {name for name, parts in JOINT_POINTS.items() if flagged.issuperset(parts)}
    return frozenset(flagged | joint)


class Point(Generic[F]):
    """One extension point: registered functions, grouped by tier in policy order.

    ``layout`` is the policy's tiers as lists of plugin names; ``enabled`` says whether a plugin's
    options leave this point switched on. A registration that is switched off is dropped at once,
    so dispatch never re-checks flags.
    """

    __slots__ = ("_by_plugin", "_enabled", "_first", "_layout", "_named", "_tiers", "name")

    def __init__(
        self,
        name: str,
        layout: Sequence[Sequence[str]],
        enabled: Callable[[str, str], bool],
    ) -> None:
        self.name = name
        self._layout = layout
        self._enabled = enabled
        self._by_plugin: dict[str, list[F]] = {}
        self._first: list[tuple[str, F]] = []
        """The scheduler's own functions (not a plugin's: a flag's), a tier ahead of them all."""
        self._tiers: list[list[F]] | None = None
        self._named: list[tuple[str, F]] | None = None

    def add(self, plugin: str, fn: F) -> None:
        if not self._enabled(plugin, self.name):
            return
        self._by_plugin.setdefault(plugin, []).append(fn)
        self._tiers = self._named = None

    def add_first(self, name: str, fn: F) -> None:
        """Register the scheduler's own ``fn`` (hard sharding's node filter) under ``name``,
        ahead of every plugin's, whatever the policy."""
        self._first.append((name, fn))
        self._tiers = self._named = None

    @property
    def tiers(self) -> list[list[F]]:
        """Registered functions per tier (tiers without any are left out)."""
        if self._tiers is None:
            tiers = [[fn for _, fn in self._first]] if self._first else []
            for names in self._layout:
                fns = [fn for name in names for fn in self._by_plugin.get(name, ())]
                if fns:
                    tiers.append(fns)
            self._tiers = tiers
        return self._tiers

    def __iter__(self) -> Iterator[F]:
        for tier in self.tiers:
            yield from tier

    def named(self) -> list[tuple[str, F]]:
        """Each registered function with its plugin's name, in policy order."""
        if self._named is None:
            self._named = [
                *self._first,
                *(
                    (name, fn)
                    for names in self._layout
                    for name in names
                    for fn in self._by_plugin.get(name, ())
                ),
            ]
        return self._named

    def __bool__(self) -> bool:
        return bool(self._by_plugin) or bool(self._first)


Simulator = Callable[[T, int, Sequence[T], Sequence[T]], Sequence[str]]
"""Why a task would not fit a node row with some tasks removed and others added."""


Among = Literal["all", "seeing", "blind"]
"""Which simulators to ask: all, those told of the changes, or those that are not."""


class SimulatePoint(Point[Simulator[T]]):
    """Volcano's ``SimulatePredicateFn`` with its ``SimulateRemoveTaskFn`` and
    ``SimulateAddTaskFn`` folded in: each function is told the tasks a preemption dry run removes
    from the node and adds to it. Volcano asks every plugin with ``enablePredicate`` for the
    verdict but tells only those with ``enablePreemptable`` or ``enabledAllocatable`` of the
    changes (``simulate_change``); any other is asked about the node as it is, and never sees a
    victim go."""

    __slots__ = ("_blind",)

    def __init__(
        self, name: str, layout: Sequence[Sequence[str]], enabled: Callable[[str, str], bool]
    ) -> None:
        super().__init__(name, layout, enabled)
        self._blind: set[str] = set()

    def add(self, plugin: str, fn: Simulator[T]) -> None:
        if not self._enabled(plugin, "simulate_change"):
            self._blind.add(plugin)
        super().add(plugin, fn)

    def ask(
        self, task: T, node: int, removed: Sequence[T], added: Sequence[T], among: Among
    ) -> list[str]:
        """Every reason the simulators ``among`` give for ``task`` not fitting row ``node``."""
        out: list[str] = []
        for plugin, fn in self.named():
            blind = plugin in self._blind
            if among != "all" and blind != (among == "blind"):
                continue
            out.extend(fn(task, node, (), ()) if blind else fn(task, node, removed, added))
        return out


def all_true(point: Point[Callable[..., bool]], *args: Any) -> bool:
    return all(fn(*args) for fn in point)


def any_true(point: Point[Callable[..., bool]], *args: Any) -> bool:
    return any(fn(*args) for fn in point)


def call_all(point: Point[Callable[..., None]], *args: Any) -> None:
    for fn in point:
        fn(*args)


def vote(point: Point[Callable[[T], int]], obj: T) -> bool:
    """Any reject → False; a tier with a permit (and no reject) → True; all abstain → next tier;
    no tier decides → True."""
    for tier in point.tiers:
        permitted = False
        for fn in tier:
            res = fn(obj)
            if res < 0:
                return False
            if res > 0:
                permitted = True
        if permitted:
            return True
    return True


def first_tier(point: Point[Callable[[T], bool]], obj: T, default: bool = False) -> bool:
    """The first tier that has functions decides, and all of them must say True."""
    for tier in point.tiers:
        return all(fn(obj) for fn in tier)
    return default


def first_result(point: Point[Callable[..., R | None]], *args: Any) -> R | None:
    """The first non-None answer (a failure), or None when every function passes."""
    for fn in point:
        res = fn(*args)
        if res is not None:
            return res
    return None


def concat(point: Point[Callable[[T], Sequence[R]]], obj: T) -> list[R]:
    out: list[R] = []
    for fn in point:
        out.extend(fn(obj))
    return out


def intersection(
    point: Point[Callable[[T, Sequence[R]], tuple[Sequence[R], int]]],
    actor: T,
    candidates: Sequence[R],
) -> list[R] | None:
    """Victims every voting plugin of a tier agrees on; plugins answering ABSTAIN are skipped.

    A plugin that offers no victim, or an intersection that runs empty, ends its tier without a
    decision and the next tier is asked, as in Volcano (``victims = nil; break``; its maintainers:
    "if victims is nil in first tier, the decision should be made by next tier", PR #1563, #3312).
    The first tier with a non-empty set decides; None when no tier does. Unlike Volcano master, an
    emptied intersection is not refilled by the tier's next plugin (volcano issue #5963).
    """
    for tier in point.tiers:
        victims: list[R] | None = None
        for fn in tier:
            chosen, verdict = fn(actor, candidates)
            if verdict == ABSTAIN:
                continue
            if victims is None:
                victims = list(chosen)
            else:
                keep = {id(v) for v in chosen}
                victims = [v for v in victims if id(v) in keep]
            if not victims:
                break
        if victims:
            return victims
    return None


def union(point: Point[Callable[[Sequence[R]], Sequence[R]]], tasks: Sequence[R]) -> list[R]:
    for tier in point.tiers:
        seen: dict[int, R] = {}
        for fn in tier:
            for victim in fn(tasks):
                seen.setdefault(id(victim), victim)
        if seen:
            return list(seen.values())
    return []


def first_nonzero(point: Point[Callable[[T, T], int]], left: T, right: T) -> int:
    for fn in point:
        res = fn(left, right)
        if res:
            return res
    return 0


@dataclass(frozen=True, slots=True)
class _Key(Generic[T]):
    fn: Callable[[T], Any]


@dataclass(frozen=True, slots=True)
class _Cmp(Generic[T]):
    fn: Callable[[T, T], int]


def _as_cmp(entry: _Key[T] | _Cmp[T]) -> Callable[[T, T], int]:
    if isinstance(entry, _Cmp):
        return entry.fn
    key = entry.fn

    def cmp(left: T, right: T) -> int:
        a, b = key(left), key(right)
        return -1 if a < b else (1 if a > b else 0)

    return cmp


class OrderPoint(Point[_Key[T] | _Cmp[T]]):
    """An order point: first non-zero comparison in tier/plugin order wins.

    Plugins may register a comparison (``add_cmp``, Volcano's ``func(l, r) int``) or, when their
    order is "by some value", a sort key (``add_key``). Comparing by a key is exactly a comparison
    that is non-zero when the keys differ, so when every registration is a key the combined order
    is the tuple of keys, compared natively: no Python call per comparison.
    """

    __slots__ = ()

    def add_key(self, plugin: str, fn: Callable[[T], Any]) -> None:
        self.add(plugin, _Key(fn))

    def add_cmp(self, plugin: str, fn: Callable[[T, T], int]) -> None:
        self.add(plugin, _Cmp(fn))

    def compare(self, left: T, right: T) -> int:
        for entry in self:
            res = _as_cmp(entry)(left, right)
            if res:
                return res
        return 0

    def sort_key(self, fallback: Callable[[T], Any]) -> Callable[[T], Any]:
        """A key function ordering objects by this point, ties broken by ``fallback``."""
        entries = list(self)
        if all(isinstance(e, _Key) for e in entries):
            keys = [e.fn for e in entries if isinstance(e, _Key)]
            return lambda obj: (*(k(obj) for k in keys), fallback(obj))
        cmps = [_as_cmp(e) for e in entries]

        def compare(left: T, right: T) -> int:
            for cmp in cmps:
                res = cmp(left, right)
                if res:
                    return res
            a, b = fallback(left), fallback(right)
            return -1 if a < b else (1 if a > b else 0)

        return functools.cmp_to_key(compare)
