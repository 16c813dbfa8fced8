"""``caldera queue``: Volcano's ``vcctl queue list``, ``get`` and ``operate -a open|close``.

``list`` and ``get NAME`` read a live cluster (``--kubeconfig``, read-only, Queues and PodGroups
only) or manifests, and show what :mod:`caldera.queue_view` computes. ``open NAME`` and
``close NAME`` change a live cluster's queue; on manifests they stop with exit 2.

How open and close work, and why. ``vcctl queue operate`` does not touch the queue: it creates
a bus ``Command`` (``pkg/cli/queue/util.go``, ``createQueueCommand``) that Volcano's queue
controller consumes, and the controller then writes ``status.state`` (``pkg/controllers/queue``:
``openQueue``/``closeQueue`` and the ``state`` package). Caldera's operator consumes such
Commands too, but a Command needs a running operator and its CRD; ``caldera queue`` writes what
the controller would have written straight away, as merge patches of the ``status`` subresource
(:mod:`caldera.k8s.queue_state`), worked out by :mod:`caldera.queue_operate`:

- ``close``: ``Closing`` (nothing when already ``Closing`` or ``Closed``). The scheduler admits
  nothing more from a queue that is not ``Open``. Caldera's operator then turns ``Closing`` into
  ``Closed`` once no PodGroup names the queue (Volcano's rule; a pod of ours without a
  PodGroup object counts as the group the pg-controller would have made for it): see
  :mod:`caldera.operator.writers.controllers`. As in Volcano, ``root`` cannot be closed, and the
  open queues under the closed one are closed too, marked ``volcano.sh/closed-by-parent: "true"``.
- ``open``: ``Open`` (nothing when already ``Open``), refused while the parent is ``Closing`` or
  ``Closed``; the queues under it closed by their parent (that annotation) are opened too, and
  the annotation set to ``"false"``.

Writing the state is also what Volcano's own controller expects to find should it run too: its
sync reads ``status.state`` as the wanted state (``Closing`` with no PodGroups becomes
``Closed``, ``Open`` stays ``Open``), so the two never fight.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from caldera import console
from caldera.cache.state import ClusterState
from caldera.queue_operate import plan as plan_of
from caldera.queue_view import UnknownQueue, queue_rows, render
from caldera.simulate.manifests import load_manifests

__all__ = ["add_queue", "run_queue"]


def add_queue(sub: Any, add_live: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register ``caldera queue`` and its four commands; ``add_live`` adds ``--kubeconfig`` and
    ``--context`` as the other commands have them."""
    queue = sub.add_parser("queue", help="list, show, open and close queues, as vcctl queue does")
    cmds = queue.add_subparsers(dest="queue_command", required=True)
    ls = cmds.add_parser("list", help="every queue, with its PodGroups counted by phase")
    get = cmds.add_parser("get", help="one queue and the queues under it")
    get.add_argument("name", metavar="NAME", help="the queue")
    for reader in (ls, get):
        reader.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
        reader.add_argument(
            "--default-queue",
            default="default",
            help="the queue of PodGroups that name none (caldera run's --default-queue)",
        )
    for verb, text in (("open", "let a queue take new work"), ("close", "stop a queue's new work")):
        op = cmds.add_parser(verb, help=f"{text} (a live cluster only)")
        op.add_argument("name", metavar="NAME", help="the queue")
    for command in (ls, get, cmds.choices["open"], cmds.choices["close"]):
        command.add_argument(
            "manifests", nargs="*", metavar="MANIFEST", help="YAML files or directories, or -"
        )
        add_live(command)


def run_queue(args: argparse.Namespace) -> int:
    live = bool(args.kubeconfig or args.context)
    verb = args.queue_command
    if verb in ("open", "close"):
        if args.manifests or not live:
            console.say(
                f"queue {verb} changes a cluster: give --kubeconfig (and --context), not manifests"
            )
            return console.USAGE
        return _operate(args, verb)
    if live and args.manifests:
        console.say(f"queue {verb}: give MANIFEST files or --kubeconfig, not both")
        return console.USAGE
    if not live and not args.manifests:
        console.say(f"queue {verb}: give MANIFEST files, or --kubeconfig to read a cluster")
        return console.USAGE
    state = _read_live(args) if live else _read_manifests(args.manifests)
    if state is None:
        return console.USAGE
    rows = queue_rows(state, args.default_queue)
    name = args.name if verb == "get" else None
    try:
        text = render(rows, args.output, name)
    except UnknownQueue:
        where = "the cluster" if live else "the manifests"
        console.say(f"queue {args.name} not found in {where}")
        return console.USAGE
    console.out(text)
    return console.OK


def _read_manifests(sources: list[str]) -> ClusterState | None:
    loaded = load_manifests(sources)
    if loaded.errors:
        console.say("; ".join(loaded.errors))
        return None
    for warning in loaded.warnings:
        console.say(warning)
    return loaded.state


def _read_live(
    args: argparse.Namespace, kinds: tuple[str, ...] = ("Queue", "PodGroup")
) -> ClusterState | None:
    from caldera.k8s.live import LiveError, read_cluster  # the API client only when it is used

    try:
        live = asyncio.run(read_cluster(args.kubeconfig, args.context, only=kinds))
    except LiveError as exc:
        console.say(str(exc))
        return None
    for warning in live.warnings:
        console.say(f"{live.server}: {warning}")
    return live.state


def _operate(args: argparse.Namespace, verb: str) -> int:
    """Volcano's queue operate ``open``/``close``, written as its controller would end it."""
    from caldera.k8s.live import LiveError
    from caldera.k8s.queue_state import write_queue_states

    state = _read_live(args, ("Queue",))
    if state is None:
        return console.USAGE
    queues = state.queues
    target = queues.get(args.name)
    if target is None:
        console.say(f"queue {args.name} not found in the cluster")
        return console.USAGE
    plan = plan_of(verb, target, queues)
    if isinstance(plan, str):
        console.say(plan)
        return console.USAGE
    if not plan:
        console.out(f"queue {args.name} is already {target.status.state}\n")
        return console.OK
    try:
        asyncio.run(write_queue_states(args.kubeconfig, args.context, plan))
    except LiveError as exc:
        console.say(str(exc))
        return console.USAGE
    for write in plan:
        before = queues[write.name].status.state or "no state"
        console.out(f"queue {write.name}: {before} -> {write.state}\n")
    return console.OK
