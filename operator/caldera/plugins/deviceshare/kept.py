"""Shared-device usage kept from session to session while the nodes stay the same.

Building a session's device tables used to cost every card of every node, and the usage every
pod on a node with cards, every session. The cards change only with the nodes, so each vendor's
table is made once per node set and each session starts from a copy with nothing used
(:func:`device_tables`). A node row's usage is worked out once per version of its pods
(:class:`RowUsage`, kept by :meth:`~caldera.api.node.NodeTable.lasting`: a row that is the same
object as in an earlier session holds the same pods in the same states), its sums kept current
as rows change, and the pods' grants looked up in the rows when a victim search asks
(:class:`Grants`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.devices.device_names import NO_NAMES, DeviceNames
from caldera.devices.fit import pod_usage
from caldera.devices.hami import cordoned
from caldera.devices.model import Card, Grant, NodeView
from caldera.devices.table import DeviceTable, add_placements
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import decoded, node_cards

__all__ = ["Grants", "Held", "Row", "RowUsage", "device_tables", "row_usage"]


def device_tables(
    nodes: NodeTable, vendors: Sequence[Vendor], names: DeviceNames = NO_NAMES
) -> list[DeviceTable]:
    """Each of ``vendors``' cards on the nodes (no usage): the tables each session starts
    from. ``names``: the node capacity's resource names as the device configuration renames
    them."""
    out: list[DeviceTable] = []
    capacity = [names.inward(c) for c in nodes.capacity]
    for vendor in vendors:
        rows = [
            node_cards(vendor, NodeView(*view))
            for view in zip(nodes.names, nodes.annotations, capacity, nodes.labels, strict=True)
        ]
        if not any(rows):
            # no node registers this vendor's cards: its pods fit nowhere
            out.append(DeviceTable(vendor.name, [()] * len(rows), []))
            continue
        cards = [
            _stale(r, withheld.get(vendor.count_resource)) if isinstance(r, tuple) else ()
            for r, withheld in zip(rows, nodes.withheld, strict=True)
        ]
        cordon = [cordoned(a, vendor.cordon_annotation) for a in nodes.annotations]
        out.append(DeviceTable(vendor.name, cards, cordon))
    return out


@dataclass(slots=True, eq=False)
class Row:
    """What one version of a node row's pods hold of one vendor's cards."""

    tasks: dict[str, Task]
    """The row's tasks this was worked out from (compared by identity)."""
    cells: list[tuple[int, int, int, int]]
    """(card column, slots, memory, cores) per card a pod uses."""
    grants: dict[str, tuple[tuple[Grant, ...], ...]]
    """Pod uid → its grants per container."""
    quota: list[tuple[str, int, int]]
    """(namespace, memory, cores) per pod."""
    instances: list[tuple[int, tuple[int, int]]] = dataclasses.field(default_factory=list)
    """(card column, (start, size)) per MIG instance a pod holds."""


class RowUsage:
    """One vendor's usage per node row, and its sums, kept across sessions on the same nodes."""

    __slots__ = (
        "placements",
        "quota",
        "rows",
        "rows_with_cards",
        "used",
        "usedcores",
        "usedmem",
        "where",
    )

    def __init__(self, table: DeviceTable) -> None:
        self.rows: dict[int, Row] = {}
        self.rows_with_cards = [row for row, at in enumerate(table.at) if at]
        self.used = np.zeros_like(table.used)
        self.usedmem = np.zeros_like(table.usedmem)
        self.usedcores = np.zeros_like(table.usedcores)
        self.quota: dict[str, list[int]] = {}
        """Namespace → [memory, cores] its pods hold."""
        self.where: dict[str, int] = {}
        """Pod uid → the row it holds cards on."""
        self.placements: dict[tuple[int, int], Counter[tuple[int, int]]] = {}
        """(row, card column) → the MIG instances there."""

    def apply(self, row: int, entry: Row, sign: int) -> None:
        for col, used, mem, cores in entry.cells:
            self.used[row, col] += sign * used
            self.usedmem[row, col] += sign * mem
            self.usedcores[row, col] += sign * cores
        for col, placement in entry.instances:
            add_placements(self.placements, (row, col), (placement,), sign)
        for namespace, mem, cores in entry.quota:
            held = self.quota.setdefault(namespace, [0, 0])
            held[0] += sign * mem
            held[1] += sign * cores
        for uid in entry.grants:
            if sign > 0:
                self.where[uid] = row
            elif self.where.get(uid) == row:
                del self.where[uid]


Held = list[tuple[int, int, tuple[tuple[Grant, ...], ...]]]
"""(vendor, row, grants per container) per vendor a pod holds cards of."""


class Grants:
    """Pod uid → what it holds: the session's own changes over the rows' kept grants."""

    __slots__ = ("_gone", "_own", "kept")

    def __init__(self) -> None:
        self.kept: list[tuple[int, RowUsage]] = []
        self._own: dict[str, Held] = {}
        self._gone: set[str] = set()

    def get(self, uid: str, default: Held | tuple[()] = ()) -> Held | tuple[()]:
        own = self._own.get(uid)
        if own is not None:
            return own
        if uid in self._gone:
            return default
        found: Held = []
        for v, kept in self.kept:
            row = kept.where.get(uid)
            if row is not None:
                found.append((v, row, kept.rows[row].grants[uid]))
        return found or default

    def __setitem__(self, uid: str, held: Held) -> None:
        self._own[uid] = held
        self._gone.discard(uid)

    def pop(self, uid: str, default: Held | tuple[()] = ()) -> Held | tuple[()]:
        held = self.get(uid, default)
        self._own.pop(uid, None)
        self._gone.add(uid)
        return held


def _stale(cards: tuple[Card, ...], plugin_devices: float | None) -> tuple[Card, ...]:
    """A node whose kubelet reports 0 of the vendor's devices has lost its device plugin: its
    registration is stale and no card is healthy (HAMi's register loop drops such a node)."""
    if plugin_devices != 0:
        return cards
    return tuple(dataclasses.replace(c, health=False) for c in cards)


def row_usage(vendor: Vendor, where: dict[str, int], tasks: dict[str, Task]) -> Row:
    """What the pods of one node row (``where``: its cards' columns by id) hold of the
    vendor's cards (§3.5)."""
    keys = vendor.keys
    cells: list[tuple[int, int, int, int]] = []
    grants: dict[str, tuple[tuple[Grant, ...], ...]] = {}
    quota: list[tuple[str, int, int]] = []
    instances: list[tuple[int, tuple[int, int]]] = []
    for task in tasks.values():
        notes = task.annotations
        text = notes.get(keys.allocated)
        if text is None or keys.node not in notes:
            continue
        if notes.get(keys.phase) == "failed":
            continue  # the device plugin handed nothing over
        usage = _usage(vendor, len(task.spec.init_containers), text)
        if usage is None:
            continue  # reported with the snapshot's problems
        grants[task.uid] = usage[0]
        held = _instances(vendor, notes)
        if held:
            grants[task.uid] = _with_instances(usage[0], held)
            instances += [(where[u], p) for u, ps in held.items() if u in where for p in ps]
        mem = cores = 0
        for uuid, used, m, c in usage[1]:
            mem += m
            cores += c
            col = where.get(uuid)
            if col is not None:
                cells.append((col, used, m, c))
        quota.append((task.namespace, mem, cores))
    return Row(tasks, cells, grants, quota, instances)


@functools.lru_cache(maxsize=1 << 16)
def _usage(
    vendor: Vendor, inits: int, text: str
) -> tuple[tuple[tuple[Grant, ...], ...], tuple[tuple[str, int, int, int], ...]] | None:
    """A running pod's grants and its (card, slots, memory, cores) usage (§3.5), or None when
    its allocation annotation cannot be read."""
    containers = decoded(vendor, text)
    if isinstance(containers, str):
        return None
    usage = pod_usage(inits, containers)
    return containers, tuple((u, c.used, c.usedmem, c.usedcores) for u, c in usage.items())


def _instances(vendor: Vendor, notes: Mapping[str, str]) -> dict[str, list[tuple[int, int]]]:
    """The MIG instances a running pod holds, per card (HAMi's scheduler restores them from
    ``hami.io/vgpu-mig-allocations``; an unreadable annotation holds none)."""
    if vendor.read_instances is None or not vendor.more_keys:
        return {}
    text = notes.get(vendor.more_keys[0])
    if not text:
        return {}
    try:
        return vendor.read_instances(text)
    except ValueError:
        return {}


def _with_instances(
    containers: tuple[tuple[Grant, ...], ...], held: Mapping[str, list[tuple[int, int]]]
) -> tuple[tuple[Grant, ...], ...]:
    """The grants with the instance each stands for: per card, the instances in the order the
    grants name that card (as HAMi's rebuild takes them)."""
    left = {uuid: list(ps) for uuid, ps in held.items()}
    out = []
    for grants in containers:
        marked = []
        for g in grants:
            places = left.get(g.uuid)
            if places:
                start, size = places.pop(0)
                g = dataclasses.replace(g, mig=("", start, size))
            marked.append(g)
        out.append(tuple(marked))
    return tuple(out)
