"""NodePorts: a pod's host ports must be free on the node, with kube-scheduler's conflict rules.

A host port is (host IP, protocol, port) from a container's ``ports`` with ``hostPort > 0``, in
regular containers and in sidecars (init containers with ``restartPolicy: Always``), both for the
ports a pod wants and for those the pods on a node hold. An empty host IP means ``0.0.0.0``, which
conflicts with the same protocol and port on any IP; a specific IP conflicts with itself and with
``0.0.0.0``. Ports in use are counted per node in numpy arrays, one per (protocol, port, IP) in
use anywhere, built from the pods already on the nodes and kept current by the event handler.

Complexity per task: O(P·N) numpy work for P host ports of the pod; pods without host ports
skip the filter at PreFilter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler, Rejection
from caldera.models.core import PodSpec
from caldera.plugins.placed import PlacedPods
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult

__all__ = ["REASON", "host_ports", "node_ports_filter"]

REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"
HostPort = tuple[str, int, str]
"""(protocol, port, host IP)."""


def host_ports(spec: PodSpec) -> list[HostPort]:
    """The pod's host ports, as kube's ``GetHostPorts`` lists them: those of its sidecars
    (restartable init containers, which run for the pod's whole life), then those of its regular
    containers. A plain init container has exited before the others start and holds none."""
    running = (*(c for c in spec.init_containers if c.is_sidecar), *spec.containers)
    return [
        (p.protocol, p.host_port, p.host_ip or ANY_IP)
        for c in running
        for p in c.ports
        if p.host_port > 0
    ]


class _Ports:
    """Per (protocol, port): host IP → number of pods using it, per node.

    Counted when a pod that asks for a host port first comes (most sessions have none). Which
    pods count, and on which row, is :class:`PlacedPods`' answer restricted to pods with host
    ports (a pod evicted this session stops counting, as in kube's NodeInfo)."""

    def __init__(self, nodes: NodeTable) -> None:
        self.n = len(nodes)
        self._placed = PlacedPods(nodes, admit=lambda t: bool(host_ports(t.spec)))
        self._used: dict[tuple[str, int], dict[str, npt.NDArray[np.int32]]] | None = None

    @property
    def used(self) -> dict[tuple[str, int], dict[str, npt.NDArray[np.int32]]]:
        if self._used is None:
            self._used = {}
            for task, row in self._placed.pods().values():
                self._count(task, row, 1)
        return self._used

    def allocated(self, task: Task) -> None:
        row = self._placed.allocated(task)  # None until the counts are made
        if row is not None:
            self._count(task, row, 1)

    def deallocated(self, task: Task) -> None:
        row = self._placed.deallocated(task)
        if row is not None:
            self._count(task, row, -1)

    def _count(self, task: Task, row: int, delta: int) -> None:
        used = self.used
        for proto, port, ip in host_ports(task.spec):
            by_ip = used.setdefault((proto, port), {})
            column = by_ip.get(ip)
            if column is None:
                column = by_ip[ip] = np.zeros(self.n, dtype=np.int32)
            column[row] += delta

    def conflicts(self, wanted: Sequence[HostPort]) -> npt.NDArray[np.bool_]:
        hit = np.zeros(self.n, dtype=bool)
        for proto, port, ip in wanted:
            by_ip = self.used.get((proto, port))
            if not by_ip:
                continue
            others = by_ip.keys() if ip == ANY_IP else (ip, ANY_IP)
            for other in others:
                used = by_ip.get(other)
                if used is not None:
                    hit |= used > 0
        return hit

    def conflicts_on(
        self, row: int, wanted: Sequence[HostPort], changes: Sequence[tuple[HostPort, int]]
    ) -> bool:
        """One node, with the counts changed by ``changes`` ((port, +1 or -1) each)."""
        for proto, port, ip in wanted:
            live = {other: int(col[row]) for other, col in self.used.get((proto, port), {}).items()}
            for (c_proto, c_port, c_ip), delta in changes:
                if (c_proto, c_port) == (proto, port):
                    live[c_ip] = live.get(c_ip, 0) + delta
            if ip == ANY_IP:
                if any(v > 0 for v in live.values()):
                    return True
            elif live.get(ip, 0) > 0 or live.get(ANY_IP, 0) > 0:
                return True
        return False


def node_ports_filter(nodes: NodeTable) -> NodeFilter:
    ports = _Ports(nodes)

    def pre_filter(task: Task) -> PreFilterResult:
        return None if host_ports(task.spec) else SKIP

    def reject(task: Task) -> list[Rejection]:
        hit = ports.conflicts(host_ports(task.spec))
        return [(REASON, hit)] if hit.any() else []

    def simulate(task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]) -> list[str]:
        wanted = host_ports(task.spec)
        if not wanted:
            return []
        changes = [(hp, -1) for t in removed if t.node == row for hp in host_ports(t.spec)]
        changes += [(hp, 1) for t in added for hp in host_ports(t.spec)]
        return [REASON] if ports.conflicts_on(row, wanted, changes) else []

    return NodeFilter(
        "NodePorts",
        reject,
        pre_filter=pre_filter,
        handler=EventHandler(allocate=ports.allocated, deallocate=ports.deallocated),
        simulate=simulate,
    )
