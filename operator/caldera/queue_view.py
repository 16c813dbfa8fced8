"""What ``caldera queue list`` and ``caldera queue get`` show, computed from a cluster's objects.

Volcano's ``vcctl queue list`` (``ListQueue`` and ``PrintQueues`` in ``pkg/cli/queue/list.go``)
prints, per queue, its name, weight, state and parent and how many of its PodGroups are in each
phase, counted as ``PodGroupStatistics.StatPodGroupCountsForQueue`` counts them
(``pkg/cli/podgroup/podgroup.go``: a PodGroup with no phase yet counts nowhere). This module does
the same, with Volcano's column names and order, and adds what a Caldera user asks next: the
queue's ``status.allocated`` (which Caldera writes) against its ``spec.deserved`` and
``spec.capability``. ``get`` (``GetQueue``/``PrintQueue`` in ``get.go``) is one queue, and here
also its child queues, as a tree of ``spec.parent``.

It only reads a :class:`~caldera.cache.state.ClusterState`, so manifests and a live cluster give
the same answer; the command (:mod:`caldera.queues_cli`) says where the objects come from.
A PodGroup naming no queue counts for the default queue, where the scheduler puts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from caldera.cache.state import ClusterState
from caldera.models.volcano import Queue
from caldera.quantity import format_resource

__all__ = [
    "PHASES",
    "QueueRow",
    "UnknownQueue",
    "queue_rows",
    "render",
    "subtree",
    "to_data",
    "to_table",
]

ROOT = "root"
PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
"""The PodGroup phases counted, in vcctl's column order."""
_HEADER = ("Name", "Weight", "State", "Parent", *PHASES, "Allocated", "Deserved", "Capability")
_WIDTHS = (25, 8, 8, 8, 8, 8, 8, 8, 8)
"""vcctl's column widths (``%-25s%-8s…``); a longer cell widens its column here instead of
pushing the rest of its row out of line."""
_FIRST = ("cpu", "memory")


class UnknownQueue(LookupError):
    """``get`` of a queue the objects do not hold."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue as the command shows it."""

    name: str
    weight: int
    state: str
    parent: str
    podgroups: Mapping[str, int]
    """Phase (of :data:`PHASES`) → how many of the queue's PodGroups are in it."""
    allocated: Mapping[str, str]
    deserved: Mapping[str, str] | None
    """None when the spec says nothing (no fixed share)."""
    capability: Mapping[str, str] | None
    """None when the spec says nothing (no cap)."""

    @property
    def tree_parent(self) -> str:
        """Where the hierarchy puts it: ``root`` when ``spec.parent`` is unset, as the queue
        controller defaults it."""
        return "" if self.name == ROOT else self.parent or ROOT


def queue_rows(state: ClusterState, default_queue: str = "default") -> list[QueueRow]:
    """Every queue of ``state``, by name, with its PodGroups counted by phase (Volcano's
    ``ListQueue``)."""
    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(PHASES, 0) for name in state.queues}
    for pg in state.podgroups.values():
        per_phase = counts.get(pg.spec.queue or default_queue)
        if per_phase is not None and pg.status.phase in per_phase:
            per_phase[pg.status.phase] += 1
    return [_row(state.queues[name], counts[name]) for name in sorted(state.queues)]


def _row(q: Queue, counts: dict[str, int]) -> QueueRow:
    return QueueRow(
        name=q.metadata.name,
        weight=q.spec.weight,
        state=q.status.state,
        parent=q.spec.parent,
        podgroups=counts,
        allocated=_quantities(q.status.allocated),
        deserved=None if q.spec.deserved is None else _quantities(q.spec.deserved),
        capability=None if q.spec.capability is None else _quantities(q.spec.capability),
    )


def _quantities(amounts: Mapping[str, float]) -> dict[str, str]:
    """Engine amounts back as Kubernetes quantities, cpu and memory first."""
    names = sorted(amounts, key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n))
    return {n: format_resource(n, amounts[n]) for n in names}


def subtree(rows: Sequence[QueueRow], name: str) -> list[tuple[int, QueueRow]]:
    """The queue ``name`` and, depth first, the queues under it (by ``spec.parent``), each with
    its depth (0 for ``name``); :class:`UnknownQueue` when there is no such queue. A parent
    cycle, which the API does not prevent, is shown once round."""
    by_name = {r.name: r for r in rows}
    if name not in by_name:
        raise UnknownQueue(name)
    children: dict[str, list[QueueRow]] = {}
    for r in rows:
        children.setdefault(r.tree_parent, []).append(r)
    out: list[tuple[int, QueueRow]] = []
    seen: set[str] = set()

    def visit(row: QueueRow, depth: int) -> None:
        seen.add(row.name)
        out.append((depth, row))
        for child in children.get(row.name, ()):
            if child.name not in seen:
                visit(child, depth + 1)

    visit(by_name[name], 0)
    return out


def to_data(row: QueueRow, children: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The row as JSON/YAML data; ``children`` (already converted) for ``get``."""
    doc: dict[str, Any] = {
        "name": row.name,
        "weight": row.weight,
        "state": row.state,
        "parent": row.parent,
        "podGroups": {phase.lower(): row.podgroups[phase] for phase in PHASES},
        "allocated": dict(row.allocated),
        "deserved": None if row.deserved is None else dict(row.deserved),
        "capability": None if row.capability is None else dict(row.capability),
    }
    if children is not None:
        doc["children"] = list(children)
    return doc


def _tree_data(tree: Sequence[tuple[int, QueueRow]]) -> dict[str, Any]:
    """``get``'s data: the first row with the rest nested under it as ``children``."""

    def build(at: int) -> tuple[dict[str, Any], int]:
        depth, row = tree[at]
        kids: list[dict[str, Any]] = []
        nxt = at + 1
        while nxt < len(tree) and tree[nxt][0] > depth:
            kid, nxt = build(nxt)
            kids.append(kid)
        return to_data(row, kids), nxt

    return build(0)[0]


def _cell(amounts: Mapping[str, str] | None) -> str:
    if not amounts:
        return "-"
    return ",".join(f"{n}={v}" for n, v in amounts.items())


def to_table(tree: Sequence[tuple[int, QueueRow]]) -> str:
    """vcctl's table (``PrintQueues``) plus the three resource columns; a child queue's name
    is indented two spaces per level under its parent's."""
    lines = [
        (
            "  " * depth + r.name,
            str(r.weight),
            r.state or "-",
            r.parent or "-",
            *(str(r.podgroups[p]) for p in PHASES),
            _cell(r.allocated),
            _cell(r.deserved),
            _cell(r.capability),
        )
        for depth, r in tree
    ]
    widths = [
        max(_WIDTHS[i] if i < len(_WIDTHS) else 0, *(len(c[i]) + 1 for c in [_HEADER, *lines]))
        for i in range(len(_HEADER) - 1)
    ]
    return "".join(
        "".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + cells[-1] + "\n"
        for cells in [_HEADER, *lines]
    )


def render(rows: Sequence[QueueRow], output: str, name: str | None = None) -> str:
    """``list`` (``name`` None) or ``get name`` in ``output``: table, json or yaml."""
    if name is None:
        tree = [(0, r) for r in rows]
        data: Any = [to_data(r) for r in rows]
    else:
        tree = subtree(rows, name)
        data = _tree_data(tree)
    if output == "json":
        return json.dumps(data, indent=2) + "\n"
    if output == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False))
    if not rows:
        return "No resources found\n"  # vcctl's words for a cluster without queues
    return to_table(tree)
