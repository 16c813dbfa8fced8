"""The devices of one session and kube's structured-parameters allocator over them.

:class:`Inventory` gathers every ResourceSlice once per session the way kube's GatherPools does
for each node: a slice is available to the node it names (``nodeName``), to every node
(``allNodes``) or to the nodes its ``nodeSelector`` matches; per pool and node only the slices of
the newest generation count, and a pool is usable on a node only when all of its
``resourceSliceCount`` slices are there (complete) and no device name repeats (valid). Slices
with per-device node selection (partitionable devices) are not modelled and ignored. Devices are
numbered once, in kube's search order (pools by driver and name, slices by name, devices in slice
order), so every per-device fact is a numpy array: the node row of node-local devices, the node
mask of shared slices, and whether a device is taken (allocated to any claim, or reserved in this
session).

:class:`Search` is kube's allocator for one node: claims in pod order, their requests in claim
order, each needed device tried in search order among the node's free devices whose class and
request selectors match, ``matchAttribute`` constraints checked as devices are added, ``All``
requests taking every matching device of the node (all must be free, and an incomplete or invalid
pool on the node is an error), ``firstAvailable`` alternatives tried in order, and backtracking
until the first full solution. A selector that fails on a device the search reaches is kube's
error. The allocation's node selector is built as kube's createNodeSelector does.

Complexity: building the inventory is O(S·N) for S shared slices plus O(D) for D devices; a
per-node candidate list is built once per session; a count of matching free devices per node is
O(D + S·N) numpy work; one search is O(C) in the simple cases (C candidate devices of the node)
and exponential in the worst case, bounded by the filter timeout.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.models.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from caldera.models.dra import Device, DeviceAttribute, ResourceSlice
from caldera.plugins.node_match import RequiredAffinity
from caldera.plugins.predicates.dra_cel import device_input

__all__ = ["AllocationError", "Alternative", "Inventory", "Pick", "RequestPlan", "Search"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
TIMED_OUT = "timed out trying to allocate devices"


class AllocationError(Exception):
    """kube's allocator error for one node (its text is the verdict)."""


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    slices: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


class Inventory:
    """Every device of the session, where it is available and whether it is taken."""

    def __init__(self, nodes: NodeTable, slices: Sequence[ResourceSlice]) -> None:
        self.n = len(nodes)
        self._affinity = RequiredAffinity(nodes)
        ordered = sorted(slices, key=lambda s: (s.spec.driver, s.spec.pool.name, s.metadata.name))
        self.slices = ordered
        pools: dict[tuple[str, str], _Pool] = {}
        for i, s in enumerate(ordered):
            key = (s.spec.driver, s.spec.pool.name)
            pools.setdefault(key, _Pool(*key)).slices.append(i)
        self.pools = list(pools.values())
        self.devices: list[Device] = []
        self.device_slice: list[int] = []
        self.ids: list[str] = []
        self.index: dict[tuple[str, str, str], list[int]] = {}
        self.ranges: list[range] = []
        """The device numbers of each slice."""
        for i, s in enumerate(ordered):
            start = len(self.devices)
            for dev in s.spec.devices:
                device_key = (s.spec.driver, s.spec.pool.name, dev.name)
                self.index.setdefault(device_key, []).append(len(self.devices))
                self.devices.append(dev)
                self.device_slice.append(i)
                self.ids.append("/".join(device_key))
            self.ranges.append(range(start, len(self.devices)))
        d = len(self.devices)
        self.row = np.full(d, -1, dtype=np.intp)
        """Node row of each usable node-local device (-1: not node-local or not usable)."""
        self.shared: list[tuple[IntArray, BoolArray]] = []
        """(devices of a shared slice, nodes where the slice is usable)."""
        self.bad: dict[int, list[str]] = {}
        """Node row → kube's words for each incomplete or invalid pool available to it."""
        self.bad_shared: list[tuple[str, BoolArray]] = []
        self.has_any = np.zeros(self.n, dtype=bool)
        """Nodes some slice is available to (usable or not)."""
        self.taken = np.zeros(d, dtype=bool)
        self._names = nodes.names
        self._node_index = nodes.index
        for pool in self.pools:
            self._gather(pool)
        self._candidates: dict[int, IntArray] = {}

    # -- GatherPools -----------------------------------------------------------------------------

    def slice_nodes(self, s: ResourceSlice) -> BoolArray | int | None:
        """A node row (nodeName), a node mask (allNodes, nodeSelector) or None (no node)."""
        spec = s.spec
        if spec.node_name:
            return self._node_index.get(spec.node_name, -1)
        if spec.all_nodes:
            return np.ones(self.n, dtype=bool)
        if spec.node_selector is not None:
            return self.selector_mask(spec.node_selector)
        return None

    def selector_mask(self, selector: NodeSelector) -> BoolArray:
        """Nodes a (v1) NodeSelector matches: any term, all of its requirements; none at all when
        a term cannot be parsed (the allocator's ``nodeaffinity.NewNodeSelector`` fails)."""
        return self._affinity.selector(selector, strict=True)

    def _gather(self, pool: _Pool) -> None:
        targets = [self.slice_nodes(self.slices[i]) for i in pool.slices]
        if all(isinstance(t, int) or t is None for t in targets):
            by_row: dict[int, list[int]] = {}
            for i, t in zip(pool.slices, targets, strict=True):
                if isinstance(t, int) and t >= 0:
                    by_row.setdefault(t, []).append(i)
            for row, members in by_row.items():
                self.has_any[row] = True
                usable, problem = self._usable(pool, members)
                if problem:
                    self.bad.setdefault(row, []).append(problem)
                for i in usable:
                    self.row[self.ranges[i].start : self.ranges[i].stop] = row
            return
        masks = np.zeros((len(pool.slices), self.n), dtype=bool)
        for k, t in enumerate(targets):
            if isinstance(t, int):
                if t >= 0:
                    masks[k, t] = True
            elif t is not None:
                masks[k] = t
        self.has_any |= masks.any(axis=0)
        # Nodes with the same set of available slices share the verdict.
        groups: dict[bytes, list[int]] = {}
        for node in np.flatnonzero(masks.any(axis=0)):
            groups.setdefault(masks[:, node].tobytes(), []).append(int(node))
        for rows in groups.values():
            here = np.zeros(self.n, dtype=bool)
            here[rows] = True
            members = [pool.slices[k] for k in np.flatnonzero(masks[:, rows[0]])]
            usable, problem = self._usable(pool, members)
            if problem:
                self.bad_shared.append((problem, here))
            for i in usable:
                self.shared.append((np.arange(self.ranges[i].start, self.ranges[i].stop), here))

    def _usable(self, pool: _Pool, members: list[int]) -> tuple[list[int], str]:
        """The slices of the newest generation, or none with kube's reason when the pool is
        incomplete or invalid."""
        newest = max(self.slices[i].spec.pool.generation for i in members)
        current = [i for i in members if self.slices[i].spec.pool.generation == newest]
        expected = self.slices[current[0]].spec.pool.resource_slice_count
        if len(current) != expected:
            return [], f"resource pool {pool.id} is currently being updated"
        names: set[str] = set()
        for i in current:
            for dev in self.slices[i].spec.devices:
                if dev.name in names:
                    return [], f"resource pool {pool.id} is currently invalid"
                names.add(dev.name)
        return current, ""

    # -- per node and per device ----------------------------------------------------------------

    def device_inputs(self) -> list[dict[str, Any]]:
        return [
            device_input(self.slices[s].spec.driver, dev)
            for dev, s in zip(self.devices, self.device_slice, strict=True)
        ]

    def candidates(self, row: int) -> IntArray:
        """The usable devices of node ``row``, in search order."""
        hit = self._candidates.get(row)
        if hit is None:
            parts = [np.flatnonzero(self.row == row)]
            parts += [devices for devices, here in self.shared if here[row]]
            hit = self._candidates[row] = np.sort(np.concatenate(parts)).astype(np.intp)
        return hit

    def problems(self, row: int) -> list[str]:
        return self.bad.get(row, []) + [p for p, here in self.bad_shared if here[row]]

    def count_per_node(self, devices: BoolArray) -> npt.NDArray[np.int64]:
        """Per node, how many of ``devices`` it can use."""
        local = devices & (self.row >= 0)
        counts = np.bincount(self.row[local], minlength=self.n).astype(np.int64)
        for members, here in self.shared:
            k = int(devices[members].sum())
            if k:
                counts += here * k
        return counts

    def lookup(self, driver: str, pool: str, device: str) -> list[int]:
        return self.index.get((driver, pool, device), [])

    def node_selector(self, picked: Sequence[int]) -> NodeSelector | None:
        """kube's createNodeSelector for an allocation of ``picked`` devices."""
        fields: list[NodeSelectorRequirement] = []
        exprs: list[NodeSelectorRequirement] = []
        for d in picked:
            spec = self.slices[self.device_slice[d]].spec
            if spec.node_name:
                req = NodeSelectorRequirement(
                    key="metadata.name", operator="In", values=(spec.node_name,)
                )
                return NodeSelector(node_selector_terms=(NodeSelectorTerm(match_fields=(req,)),))
            if spec.node_selector is not None and len(spec.node_selector.node_selector_terms) == 1:
                term = spec.node_selector.node_selector_terms[0]
                fields += [r for r in term.match_fields if r not in fields]
                exprs += [r for r in term.match_expressions if r not in exprs]
        if not fields and not exprs:
            return None
        term = NodeSelectorTerm(match_expressions=tuple(exprs), match_fields=tuple(fields))
        return NodeSelector(node_selector_terms=(term,))


# -- the search ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alternative:
    """A request, or one subrequest of a ``firstAvailable`` request, with its selector results."""

    name: str
    """The result's request name (``request`` or ``request/subrequest``)."""
    all_devices: bool
    count: int
    matches: BoolArray
    errors: dict[int, str]


@dataclass(frozen=True, slots=True)
class RequestPlan:
    name: str
    alternatives: tuple[Alternative, ...]
    prioritized: bool


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    key: str
    requests: tuple[RequestPlan, ...]
    constraints: tuple[tuple[frozenset[str], str], ...]
    """(request names, fully qualified attribute) of each matchAttribute constraint."""


@dataclass(frozen=True, slots=True)
class Pick:
    claim: int
    request: str
    device: int


def _attribute(device: Device, driver: str, name: str) -> DeviceAttribute | None:
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


@dataclass(slots=True)
class _Constraint:
    requests: frozenset[str]
    attribute: str
    value: DeviceAttribute | None = None
    count: int = 0

    def applies(self, request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or request.split("/", 1)[0] in self.requests


class Search:
    """One Allocate call of kube's allocator, for one node."""

    def __init__(
        self,
        inventory: Inventory,
        row: int,
        claims: Sequence[ClaimPlan],
        taken: BoolArray,
        deadline: float | None,
    ) -> None:
        self.inv = inventory
        self.claims = claims
        self.taken = taken
        self.deadline = deadline
        self.cands = inventory.candidates(row)
        self.row = row
        self.using: set[int] = set()
        self.picks: list[Pick] = []
        self.constraints = [
            [_Constraint(reqs, attr) for reqs, attr in plan.constraints] for plan in claims
        ]
        self._steps = 0
        self._all: dict[tuple[int, int, int], list[int]] = {}

    def run(self) -> list[Pick] | None:
        """The devices picked for every claim, None when there is no solution; raises
        :class:`AllocationError` where kube's allocator errors out."""
        for ci, plan in enumerate(self.claims):
            for ri, req in enumerate(plan.requests):
                for ai, alt in enumerate(req.alternatives):
                    if alt.all_devices:
                        self._all[(ci, ri, ai)] = self._all_devices(plan, alt)
        return list(self.picks) if self._one(0, 0, 0, None) else None

    def _error(self, d: int, alt: Alternative) -> None:
        message = alt.errors.get(d)
        if message is not None:
            raise AllocationError(message)

    def _all_devices(self, plan: ClaimPlan, alt: Alternative) -> list[int]:
        problems = self.inv.problems(self.row)
        if problems:
            raise AllocationError(
                f"claim {plan.key}, request {alt.name}: asks for all devices, but " + problems[0]
            )
        out = []
        for d in self.cands:
            self._error(int(d), alt)
            if alt.matches[d]:
                out.append(int(d))
        return out

    def _tick(self) -> None:
        self._steps += 1
        if self.deadline is None or self._steps % 256:
            return
        if time.monotonic() > self.deadline:
            raise AllocationError(TIMED_OUT)

    def _one(self, ci: int, ri: int, k: int, ai: int | None) -> bool:
        self._tick()
        if ci >= len(self.claims):
            return True
        plan = self.claims[ci]
        if ri >= len(plan.requests):
            return self._one(ci + 1, 0, 0, None)
        req = plan.requests[ri]
        if ai is None:
            if req.prioritized:
                return any(self._one(ci, ri, 0, a) for a in range(len(req.alternatives)))
            ai = 0
        alt = req.alternatives[ai]
        if alt.all_devices:
            devices = self._all[(ci, ri, ai)]
            if not devices:
                return False
            if k >= len(devices):
                return self._one(ci, ri + 1, 0, None)
            d = devices[k]
            if not self._add(ci, alt, d, must=True):
                return False
            if self._one(ci, ri, k + 1, ai):
                return True
            self._remove(ci, alt, d)
            return False
        if k >= alt.count:
            return self._one(ci, ri + 1, 0, None)
        for raw in self.cands:
            d = int(raw)
            if self.taken[d] or d in self.using:
                continue
            self._error(d, alt)
            if not alt.matches[d] or not self._add(ci, alt, d, must=False):
                continue
            if self._one(ci, ri, k + 1, ai):
                return True
            self._remove(ci, alt, d)
        return False

    def _add(self, ci: int, alt: Alternative, d: int, *, must: bool) -> bool:
        if self.taken[d] or d in self.using:
            return False
        device = self.inv.devices[d]
        driver = self.inv.slices[self.inv.device_slice[d]].spec.driver
        added: list[_Constraint] = []
        for c in self.constraints[ci]:
            if not c.applies(alt.name):
                continue
            attr = _attribute(device, driver, c.attribute)
            ok = attr is not None and (c.count == 0 or attr == c.value)
            if not ok:
                for done in added:
                    done.count -= 1
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {alt.name}: cannot add device "
                        f"{self.inv.ids[d]} because a claim constraint would not be satisfied"
                    )
                return False
            if c.count == 0:
                c.value = attr
            c.count += 1
            added.append(c)
        self.using.add(d)
        self.picks.append(Pick(ci, alt.name, d))
        return True

    def _remove(self, ci: int, alt: Alternative, d: int) -> None:
        for c in self.constraints[ci]:
            if c.applies(alt.name):
                c.count -= 1
        self.using.discard(d)
        self.picks.pop()
