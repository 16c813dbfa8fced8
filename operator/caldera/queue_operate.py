"""What opening or closing a queue writes: Volcano's queue controller's rules, worked out once.

Two callers ask for the same thing. ``caldera queue open|close`` (:mod:`caldera.queues_cli`) and
the bus ``Command`` objects that ``vcctl queue operate`` creates (``pkg/cli/queue/util.go``,
``createQueueCommand``), which the operator consumes as Volcano's queue controller does
(:mod:`caldera.operator.writers.controllers`). Both turn the wanted action into the list of
:class:`QueueWrite` that Volcano's ``openQueue``/``closeQueue`` with
``openHierarchicalQueue``/``closeHierarchicalQueue`` (``pkg/controllers/queue``) would make:

- close: the queue becomes ``Closing`` (the operator makes it ``Closed`` once nothing is left in
  it), and every open queue under it too, marked ``volcano.sh/closed-by-parent: "true"``;
  ``root`` cannot be closed; a queue already ``Closing`` or ``Closed`` is left as it is.
- open: the queue becomes ``Open``, refused while its parent is shut; the queues under it that
  its closing closed (that annotation) open again, the annotation set to ``"false"``;
- a queue that changes under a shut parent closes, and one its parent closed opens with the
  parent (``syncHierarchicalQueue``): :func:`follow_parent`, for the operator.

Pure: the writes are made by :mod:`caldera.k8s.queue_state`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from caldera.models.volcano import Queue

__all__ = [
    "ACTIONS",
    "CLOSED_BY_PARENT",
    "QueueWrite",
    "command_target",
    "follow_parent",
    "plan",
]

CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
"""Volcano's queue controller marks the queues it closed because their parent closed."""
SHUT = ("Closing", "Closed")
ACTIONS = {"OpenQueue": "open", "CloseQueue": "close"}
"""A bus Command's ``action`` (Volcano's ``busv1alpha1.Action``) → the operation."""
QUEUE_API = "scheduling.volcano.sh/v1beta1"


@dataclass(frozen=True, slots=True)
class QueueWrite:
    """Set queue ``name``'s ``status.state`` to ``state``, after its ``annotations`` (none:
    leave them)."""

    name: str
    state: str
    annotations: Mapping[str, str] = field(default_factory=dict)


def plan(verb: str, target: Queue, queues: Mapping[str, Queue]) -> list[QueueWrite] | str:
    """The writes that ``verb`` (``open`` or ``close``) on ``target`` makes, in order; a
    message when it cannot be done."""
    return _close(target, queues) if verb == "close" else _open(target, queues)


def command_target(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(queue name, ``open`` or ``close``) of a bus Command that Volcano's queue controller
    takes (``IsQueueReference``: its ``target`` is a ``scheduling.volcano.sh/v1beta1`` Queue),
    or None for any other Command."""
    target = body.get("target")
    if not isinstance(target, Mapping):
        return None
    if target.get("apiVersion") != QUEUE_API or target.get("kind") != "Queue":
        return None
    name, verb = target.get("name"), ACTIONS.get(str(body.get("action")))
    if not isinstance(name, str) or not name or verb is None:
        return None
    return name, verb


def follow_parent(target: Queue, queues: Mapping[str, Queue]) -> list[QueueWrite]:
    """``syncHierarchicalQueue``, for a queue that changed (a new one included): under a parent
    that is ``Closing`` or ``Closed``, an open queue closes, marked closed by its parent; under
    an open parent, a queue its parent closed opens again."""
    name = target.metadata.name
    parent = queues.get(target.spec.parent or "root")
    if name == "root" or parent is None:
        return []
    mine, marked = target.status.state, target.metadata.annotations.get(CLOSED_BY_PARENT)
    if parent.status.state in SHUT and mine not in SHUT:
        return [QueueWrite(name, "Closing", {CLOSED_BY_PARENT: "true"})]
    if parent.status.state == "Open" and mine in SHUT and marked == "true":
        return [QueueWrite(name, "Open", {CLOSED_BY_PARENT: "false"})]
    return []


def _children(queues: Mapping[str, Queue], name: str) -> list[Queue]:
    return [
        q
        for n, q in sorted(queues.items())
        if n != name and n != "root" and (q.spec.parent or "root") == name
    ]


def _close(target: Queue, queues: Mapping[str, Queue]) -> list[QueueWrite] | str:
    """``closeQueue`` with ``closeHierarchicalQueue``: the queue and, under it, every queue not
    yet closing or closed (marked closed by its parent); a message when it cannot be closed."""
    name = target.metadata.name
    if name == "root":
        return "the root queue cannot be closed"
    if target.status.state in SHUT:
        return []
    writes = [QueueWrite(name, "Closing")]
    todo, seen = [name], {name}
    while todo:
        for child in _children(queues, todo.pop()):
            n = child.metadata.name
            if n in seen or child.status.state in SHUT:
                continue  # closed on its own: so are the ones under it, or they chose to stay
            seen.add(n)
            todo.append(n)
            writes.append(QueueWrite(n, "Closing", {CLOSED_BY_PARENT: "true"}))
    return writes


def _open(target: Queue, queues: Mapping[str, Queue]) -> list[QueueWrite] | str:
    """``openQueue`` with ``openHierarchicalQueue``: the queue, refused while its parent is
    shut, and, under it, the queues its closing closed."""
    name, parent = target.metadata.name, target.spec.parent
    above = queues.get(parent) if parent and parent != "root" else None
    if above is not None and above.status.state in SHUT:
        return (
            f"queue {name} cannot open while its parent queue {parent} is "
            f"{above.status.state}: open {parent} first"
        )
    if target.status.state == "Open":
        return []
    mark = target.metadata.annotations.get(CLOSED_BY_PARENT)
    writes = [
        QueueWrite(name, "Open", {CLOSED_BY_PARENT: "false"} if mark not in (None, "false") else {})
    ]
    todo, seen = [name], {name}
    while todo:
        for child in _children(queues, todo.pop()):
            n = child.metadata.name
            if n in seen or child.metadata.annotations.get(CLOSED_BY_PARENT) != "true":
                continue  # closed on its own: it stays closed, and so do the ones under it
            seen.add(n)
            todo.append(n)
            writes.append(QueueWrite(n, "Open", {CLOSED_BY_PARENT: "false"}))
    return writes
