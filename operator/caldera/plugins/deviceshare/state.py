"""One session's shared devices: every vendor's cards and usage, the pods' requests, the quota.

Built when the session opens: each vendor's :class:`~caldera.devices.table.DeviceTable` from the
node registrations, usage rebuilt from the pods on the nodes (HAMi's §3.5: the ``allocated``
annotation of every pod that carries the node annotation, Succeeded and Failed pods left out), and
the namespace quota used so far. Then, for the session:

- **Filter.** Per pod, each GPU container's walk on every node at once; the verdict of a
  request shape is cached and refreshed only on the rows whose usage changed since (pods of one
  job share a shape, so a gang of 8 costs one full walk and 7 single-row updates). Pods the arrays
  cannot decide alone are fitted exactly on the surviving nodes.
- **Reserve/unreserve.** Placing a task fits it exactly on its node (HAMi's card order and tie
  rule), adds its grants to the usage and the namespace quota, and gives the task the annotations
  HAMi's device plugin reads; unplacing (a gang discarded, a victim evicted) takes them back.
- **Score.** The usage each node's cards are at (§5.1): :mod:`~caldera.plugins.deviceshare.scores`
  turns it into the node score.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.snapshot import Snapshot
from caldera.api.task import Task
from caldera.devices.device_names import NO_NAMES, DeviceNames
from caldera.devices.fit import (
    CardUse,
    FitOptions,
    NodeFit,
    Quota,
    fit_node,
    kind_ok,
    pod_usage,
)
from caldera.devices.hami import cordoned
from caldera.devices.model import CardRequest, DeviceDefaults, Grant
from caldera.devices.table import Base, DeviceTable
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import VENDORS
from caldera.plugins.deviceshare.holders import CardHolders
from caldera.plugins.deviceshare.kept import Grants, RowUsage, device_tables, row_usage

__all__ = ["DeviceState", "PodNeed"]

log = logging.getLogger(__name__)

BoolArray = npt.NDArray[np.bool_]
Rejection = tuple[str, BoolArray]
Containers = tuple[tuple[bool, CardRequest | None], ...]
"""(is an init container, its request) per container, init containers first."""

RELEASABLE_REASONS = frozenset(
    {
        "CardInsufficientMemory",
        "CardInsufficientCore",
        "CardTimeSlicingExhausted",
        "ExclusiveDeviceAllocateConflict",
        "CardComputeUnitsExhausted",
        "AllocatedCardsInsufficientRequest",
    }
)
"""The walk's reasons that evicting pods from the node can cure (the cards are there, taken)."""

MAX_NODE_SCORE = 30.0
"""§5.1's score of a node whose cards are all fully used (three shares, times 10)."""


@dataclass(frozen=True, slots=True)
class PodNeed:
    """What one pod asks of one vendor."""

    vendor: int
    containers: Containers
    opts: FitOptions
    exact: bool
    """The arrays alone cannot decide: several app containers share the node, NUMA binding, or
    a namespace quota."""
    screen_opts: FitOptions
    """``opts`` without the quota: what the arrays' walk depends on."""


class DeviceState:
    def __init__(
        self,
        snapshot: Snapshot,
        defaults: DeviceDefaults,
        gpu_policy: str,
        vendors: Sequence[Vendor] = VENDORS,
        names: DeviceNames = NO_NAMES,
    ) -> None:
        nodes = snapshot.nodes
        self.nodes = nodes
        self.names = names
        """The resource names the device configuration renames (HAMi's device config file)."""
        self.defaults = defaults
        self.gpu_policy = gpu_policy
        self.vendors: list[Vendor] = list(vendors)
        # the cards change only with the nodes: worked out once per node set
        key = ("device tables", tuple(v.name for v in self.vendors), names)
        templates = nodes.derived(key, lambda: device_tables(nodes, self.vendors, names))
        self.tables: list[DeviceTable] = [t.fresh() for t in templates]
        self.quota_limits = {
            ns: hard for ns, hard in snapshot.quotas.items() if self._has_device_quota(hard)
        }
        self.quota_used: dict[tuple[int, str], list[int]] = {}
        self.grants = Grants()
        """Pod uid → (vendor, row, grants per container) it holds."""
        self._needs: dict[str, list[PodNeed] | str] = {}
        self._screens: dict[tuple[object, ...], tuple[BoolArray, dict[str, BoolArray], int]] = {}
        self._bases: dict[tuple[object, ...], Base] = {}
        self._node_opts: dict[tuple[object, ...], FitOptions] = {}
        self.holders = CardHolders(self.vendors, nodes, self.grants)
        self.registered = max(1, sum(1 for t in self.tables if t.width))
        """Vendors some node registers cards of (the node score sums one share per vendor)."""
        self._rebuild()

    def _has_device_quota(self, hard: dict[str, float]) -> bool:
        return any(
            f"limits.{self.names.outward(v.quota_memory)}" in hard
            or f"limits.{self.names.outward(v.quota_cores)}" in hard
            for v in self.vendors
        )

    # -- usage rebuild -----------------------------------------------------------------------

    def _rebuild(self) -> None:
        """Usage from the pods on the nodes. Each node row's is worked out once per version of
        its pods (:meth:`NodeTable.lasting`: a row that is the same object as in an earlier
        session holds the same pods), and the sums over all rows are kept up to date with it,
        so a session pays for the rows whose pods changed."""
        nodes = self.nodes
        for v, vendor in enumerate(self.vendors):
            table = self.tables[v]
            if not table.width:
                continue
            kept = nodes.lasting(("device usage", vendor.name), functools.partial(RowUsage, table))
            for row in kept.rows_with_cards:
                tasks = nodes.tasks[row]
                hit = kept.rows.get(row)
                if hit is not None and hit.tasks is tasks:
                    continue
                if hit is not None:
                    kept.apply(row, hit, -1)
                entry = row_usage(vendor, table.at[row], tasks)
                kept.apply(row, entry, 1)
                kept.rows[row] = entry
            table.used = kept.used.copy()
            table.usedmem = kept.usedmem.copy()
            table.usedcores = kept.usedcores.copy()
            table.held_instances(kept.placements)
            for namespace, (mem, cores) in kept.quota.items():
                self.quota_used[(v, namespace)] = [mem, cores]
            self.grants.kept.append((v, kept))

    def _hold(
        self, v: int, row: int, task: Task, containers: Sequence[Sequence[Grant]], sign: int = 1
    ) -> None:
        usage = pod_usage(len(task.spec.init_containers), containers)
        self.tables[v].apply(row, usage, sign)
        if self.vendors[v].holders is not None:
            self.holders.changed(row)
        used = self.quota_used.setdefault((v, task.namespace), [0, 0])
        for use in usage.values():
            used[0] += sign * use.usedmem
            used[1] += sign * use.usedcores
        # no entry in the node table's change log: placing or unplacing the task made one

    # -- what a pod asks for -----------------------------------------------------------------

    def needs(self, task: Task) -> list[PodNeed] | str:
        """The pod's requests per vendor (empty: it asks for no shared device), or why its
        annotations are invalid."""
        hit = self._needs.get(task.uid)
        if hit is None:
            hit = self._needs[task.uid] = self._read_needs(task)
        return hit

    def _read_needs(self, task: Task) -> list[PodNeed] | str:
        spec = task.spec
        inward = self.names.inward
        containers = [
            (init, c.name, inward(c.resources.limits), inward(c.resources.requests))
            for init, c in (
                *((True, c) for c in spec.init_containers),
                *((False, c) for c in spec.containers),
            )
        ]
        named: set[str] = set()
        for _, _, limits, requests in containers:
            named.update(limits)
            named.update(requests)
        out: list[PodNeed] = []
        for v, vendor in enumerate(self.vendors):
            if named.isdisjoint(vendor.asked_by):
                continue
            reqs = tuple(
                (
                    init,
                    None
                    if init and vendor.app_only
                    else vendor.read_request(limits, requests, self.defaults),
                )
                for init, _, limits, requests in containers
            )
            for (init, request), (_, name, limits, requests) in zip(reqs, containers, strict=True):
                if init and vendor.app_only:
                    continue
                if request is None and (asked := _asked(vendor, limits, requests)):
                    # HAMi would give this container no card and bind the pod anyway, for
                    # the device plugin to fail it: say so instead
                    outward = self.names.outward
                    return (
                        f"container {name!r}: {', '.join(map(outward, asked))} is not a "
                        f"{vendor.name} device request ({outward(vendor.count_resource)} must be "
                        f"a positive whole number and {outward(vendor.quota_memory)} a whole "
                        "number of MiB, not negative)"
                    )
            if not any(r is not None for _, r in reqs):
                continue
            try:
                opts = vendor.read_options(task.annotations, self.gpu_policy, frozenset())
            except ValueError as exc:
                return str(exc)
            quota = self._quota(v, task.namespace)
            if quota is not None:
                opts = dataclasses.replace(opts, quota=quota)
            # several containers: each walk sees what the earlier ones were given (usage, and a
            # vendor's customFilterRule), which only the exact walk knows
            asking = sum(1 for _, r in reqs if r is not None)
            exact = asking > 1 or opts.numa_bind or quota is not None
            if self.tables[v].has_mig:  # several instances may share one MIG card
                exact = exact or any(r.nums > 1 for _, r in reqs if r is not None)
            if vendor.walk_decides is not None:
                exact = exact or any(vendor.walk_decides(r, opts) for _, r in reqs if r)
            exact = exact or not vendor.screened
            screen_opts = opts if quota is None else dataclasses.replace(opts, quota=None)
            out.append(PodNeed(v, reqs, opts, exact, screen_opts))
        return out

    def _quota(self, v: int, namespace: str) -> Quota | None:
        hard = self.quota_limits.get(namespace)
        if hard is None:
            return None
        vendor = self.vendors[v]
        mem = hard.get(f"limits.{self.names.outward(vendor.quota_memory)}")
        cores = hard.get(f"limits.{self.names.outward(vendor.quota_cores)}")
        if mem is None and cores is None:
            return None
        used = self.quota_used.get((v, namespace), [0, 0])
        factor = vendor.memory_factor or self.defaults.memory_factor
        return Quota(
            None if mem is None else int(mem) * factor - used[0],
            None if cores is None else int(cores) - used[1],
        )

    # -- filter ---------------------------------------------------------------------------

    def predicate(self, task: Task) -> list[Rejection]:
        needs = self.needs(task)
        n = len(self.nodes)
        if isinstance(needs, str) or not needs:
            return []  # an invalid request is the pre-filter's verdict
        failed: dict[str, BoolArray] = {}
        alive = np.ones(n, dtype=bool)
        for need in needs:
            if self.vendors[need.vendor].screened:
                alive = self._screen_need(need, alive, failed)
            else:
                alive = self._count_need(need, alive, failed)
            if need.exact:
                alive = self._exact(need, alive, failed)
        return list(failed.items())

    def _count_need(
        self, need: PodNeed, alive: BoolArray, failed: dict[str, BoolArray]
    ) -> BoolArray:
        """For a vendor the arrays do not sieve: only nodes with as many of its cards as each
        container asks (HAMi's ``NodeInsufficientDevice``, checked before any walk)."""
        ncards = self.tables[need.vendor].ncards
        for _, request in need.containers:
            if request is not None:
                short = alive & (ncards < request.nums)
                if short.any():
                    reason = "NodeInsufficientDevice"
                    failed[reason] = failed[reason] | short if reason in failed else short
                alive = alive & ~short
        return alive

    def pre_predicate(self, task: Task) -> str | None:
        """Why the pod's device request or annotations are invalid, for every node at once."""
        needs = self.needs(task)
        return needs if isinstance(needs, str) else None

    def _screen_need(
        self, need: PodNeed, alive: BoolArray, failed: dict[str, BoolArray]
    ) -> BoolArray:
        for _, request in need.containers:
            if request is None:
                continue
            fits, reasons = self._screen(need, request)
            newly = alive & ~fits
            if newly.any():
                for reason, mask in reasons.items():
                    hit = newly & mask
                    if hit.any():
                        failed[reason] = failed[reason] | hit if reason in failed else hit
            alive = alive & fits
        return alive

    def _screen(
        self, need: PodNeed, request: CardRequest
    ) -> tuple[BoolArray, dict[str, BoolArray]]:
        """The walk's verdict for this request on every node, refreshed on changed rows only."""
        table = self.tables[need.vendor]
        key = (need.vendor, request, need.screen_opts)
        changes = self.nodes.changes
        hit = self._screens.get(key)
        if hit is not None:
            fits, reasons, seen = hit
            if seen == len(changes):
                return fits, reasons
            rows = np.asarray(changes[seen:], dtype=np.intp)  # repeats are harmless
            if len(rows) < len(table) // 8:
                sub_fits, sub = table.screen(request, need.screen_opts, self._base(need), rows)
                fits[rows] = sub_fits
                for reason in reasons.keys() - sub.keys():
                    reasons[reason][rows] = False
                for reason, counts in sub.items():
                    mask = reasons.get(reason)
                    if mask is None:
                        mask = reasons[reason] = np.zeros(len(table), dtype=bool)
                    mask[rows] = counts > 0
                self._screens[key] = (fits, reasons, len(changes))
                return fits, reasons
        fits, full = table.screen(request, need.screen_opts, self._base(need))
        masks = {r: c > 0 for r, c in full.items()}
        self._screens[key] = (fits, masks, len(changes))
        return fits, masks

    def _base(self, need: PodNeed) -> Base:
        key = (need.vendor, need.screen_opts)
        hit = self._bases.get(key)
        if hit is None:
            table = self.tables[need.vendor]
            vendor = self.vendors[need.vendor].name
            request = next(r for _, r in need.containers if r is not None)
            kinds = np.array(
                [kind_ok(m, mode, request, need.opts, vendor) for m, mode in table.kinds],
                dtype=bool,
            )
            hit = self._bases[key] = table.base(need.screen_opts, kinds)
        return hit

    def _exact(self, need: PodNeed, alive: BoolArray, failed: dict[str, BoolArray]) -> BoolArray:
        """HAMi's own walk on the nodes the arrays let through."""
        for row in np.flatnonzero(alive):
            fit = self.fit(need, int(row))
            if fit.grants is None:
                alive[row] = False
                for reason in fit.counts:
                    mask = failed.setdefault(reason, np.zeros(len(alive), dtype=bool))
                    mask[row] = True
        return alive

    def simulate(
        self, task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]
    ) -> list[str]:
        """Why ``task``'s cards would not fit node ``row`` once ``removed`` gave theirs back
        (empty: they would). ``added`` is not modelled: victim search adds nothing."""
        needs = self.needs(task)
        if isinstance(needs, str) or not needs:
            return []
        out = []
        for need in needs:
            uses = self.tables[need.vendor].uses(row)
            at = self.tables[need.vendor].at[row]
            for gone in removed:
                for v, where, containers in self.grants.get(gone.uid, ()):
                    if v != need.vendor or where != row:
                        continue
                    inits = len(gone.spec.init_containers)
                    for uuid, use in pod_usage(inits, containers).items():
                        j = at.get(uuid)
                        if j is not None:
                            uses[j].used -= use.used
                            uses[j].usedmem -= use.usedmem
                            uses[j].usedcores -= use.usedcores
                            if use.placements:
                                left = list(uses[j].placements)
                                for p in use.placements:
                                    if p in left:
                                        left.remove(p)
                                uses[j].placements = tuple(left)
            fit = self.fit(need, row, uses)
            if fit.grants is None:
                out.append(fit.reason)
        return out

    def fit(self, need: PodNeed, row: int, uses: list[CardUse] | None = None) -> NodeFit:
        """HAMi's fit of the pod's containers on node ``row`` as its cards are used now."""
        table = self.tables[need.vendor]
        vendor = self.vendors[need.vendor]
        opts = self.node_options(need, row)
        current = uses if uses is not None else table.uses(row)
        return fit_node(table.cards[row], current, need.containers, opts, vendor.name, vendor.walk)

    def node_options(self, need: PodNeed, row: int) -> FitOptions:
        """The pod's fit options on node ``row``: its cordoned cards, pair scores, what the
        vendor reads of the node, and who holds the cards (for a vendor reading that)."""
        opts = self._node_options(need, row)
        if self.vendors[need.vendor].holders is None:
            return opts
        return dataclasses.replace(opts, holders=self.holders.of(need.vendor, row))

    def _node_options(self, need: PodNeed, row: int) -> FitOptions:
        vendor = self.vendors[need.vendor]
        key = (need.opts, need.vendor, row)
        opts = self._node_opts.get(key)
        if opts is None:
            annotations = self.nodes.annotations[row]
            opts = dataclasses.replace(
                need.opts,
                cordoned=cordoned(annotations, vendor.cordon_annotation),
                pair_scores=_pair_scores(vendor, annotations.get(vendor.score_annotation, "")),
            )
            if vendor.read_node is not None:
                opts = vendor.read_node(annotations, opts)
            self._node_opts[key] = opts
        return opts

    # -- reserve / unreserve ------------------------------------------------------------------

    def reserve(
        self, task: Task, now: float
    ) -> list[tuple[int, int, tuple[tuple[Grant, ...], ...]]]:
        """Take the cards HAMi's walk picks for the placed ``task``; what it now holds."""
        needs = self.needs(task)
        if isinstance(needs, str) or not needs:
            return []
        row = task.node
        held = []
        annotations: dict[str, str] = {}
        for need in needs:
            fit = self.fit(need, row)
            if fit.grants is None:
                # the filter said yes; only a change between filter and placement gets here
                log.error("pod %s: no cards left on %s: %s", task.key, task.node_name, fit.reason)
                continue
            containers = tuple(tuple(g) for g in fit.grants)
            self._hold(need.vendor, row, task, containers)
            held.append((need.vendor, row, containers))
            vendor = self.vendors[need.vendor]
            names = [c.name for c in (*task.spec.init_containers, *task.spec.containers)]
            annotations.update(
                vendor.bind_annotations(task.node_name, containers, now, task.annotations, names)
            )
        self.grants[task.uid] = held
        task.bind_annotations.update(annotations)
        return held

    def unreserve(self, task: Task) -> None:
        for v, row, containers in self.grants.pop(task.uid, ()):
            self._hold(v, row, task, containers, sign=-1)
            for key in self.vendors[v].written:
                task.bind_annotations.pop(key, None)

    # -- score --------------------------------------------------------------------------------


def _asked(vendor: Vendor, limits: Mapping[str, float], requests: Mapping[str, float]) -> list[str]:
    """The vendor's main resources a container names (count, memory, cores)."""
    names = {vendor.count_resource, vendor.quota_memory, vendor.quota_cores}
    return sorted(names & (limits.keys() | requests.keys()))


@functools.lru_cache(maxsize=1024)
def _pair_scores(vendor: Vendor, text: str) -> dict[str, dict[str, int]]:
    if not text or vendor.read_pair_scores is None:
        return {}
    try:
        return vendor.read_pair_scores(text)
    except ValueError:
        return {}
