"""numa-aware: Guaranteed pods placed where the kubelet's topology manager will admit them.

Follows Volcano's ``numa-aware`` plugin (``pkg/scheduler/plugins/numaaware``: ``predicateFn``,
``filterNodeByPolicy``, ``batchNodeOrderFn``; the cpumanager provider's ``GetTopologyHints``,
``generateCPUTopologyHints`` and ``Allocate``; the best-effort, restricted and single-numa-node
policies' ``Predicate`` over ``filterProvidersHints``/``mergeFilteredHints``) on each node's
Numatopology (``nodeinfo.volcano.sh/v1alpha1``):

- Only Guaranteed pods are checked. A pod annotated ``volcano.sh/numa-topology-policy``
  (``best-effort``, ``restricted``, ``single-numa-node``; ``none`` or absent: no preference)
  needs a node with a Numatopology, the ``static`` CPU manager policy and that same topology
  manager policy (reasons ``numa info is empty``, ``cpu manager policy isn't static``,
  ``task topology polocy[…] is different with node[…]`` in Volcano's words,
  ``cpu allocatable map is empty``). A pod without one is checked only on nodes whose static
  CPU manager runs a topology policy other than none.
- Per container with a whole number of cpus, the CPU manager's hints: every set of the node's
  NUMA nodes whose free CPUs (``numares.cpu.allocatable`` less the ``resReserved`` cpus) cover
  the request, preferred when it is as small as any set whose CPUs (free or not) could. The node's
  policy admits: best-effort always, restricted with a preferred hint, single-numa-node with a
  preferred hint of one NUMA node. The narrowest preferred hint (the lowest-numbered on ties)
  is the container's, and the next container sees what it takes.
- Score: fewer NUMA nodes in the pod's hints, higher (``100 − 100 × n / max n`` over the nodes
  scored, times ``weight``).
- A placed pod's CPUs come from its hint's NUMA nodes first (lowest socket, core, cpu ids),
  then from the rest; later pods of the session see them taken.

The counts of free CPUs per NUMA node are an array over the NUMA-aware nodes, and the hints of
every such node for a container are one pass over all NUMA-node sets, so a pod's verdict on all
nodes is a few array operations.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import Field

from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import BoolArray, EventHandler, IntArray, Rejection, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer
from caldera.models.core import Container, qos_rank
from caldera.models.numa import Numatopology
from caldera.quantity import parse_quantity

__all__ = ["POLICY_ANNOTATION", "NumaAwareArgs", "NumaAwarePlugin"]

POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
MAX_NODE_SCORE = 100
MAX_NUMA = 8
"""NUMA nodes per machine the hint search looks at (2^8 sets)."""
IntMatrix = npt.NDArray[np.int64]


class NumaAwareArgs(Args):
    weight: int = Field(1, ge=0)


def whole_cpus(container: Container) -> int:
    """The container's cpu request if it is a whole number of cpus (``guaranteedCPUs``)."""
    request = container.resources.requests.get("cpu", container.resources.limits.get("cpu"))
    if request is None or request % 1000:
        return 0
    return int(request // 1000)


@dataclass(slots=True)
class NodeNuma:
    """One NUMA-aware node: its CPUs, where each sits, and which are free."""

    policy: str
    static: bool
    numa_of: dict[int, int]
    place: dict[int, tuple[int, int, int]]
    free: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, topo: Numatopology) -> NodeNuma:
        detail = topo.spec.cpu_detail
        place = {cpu: (info.socket, info.core, cpu) for cpu, info in detail.items()}
        info = topo.spec.numares.get("cpu")
        free = set(info.cpus) if info is not None else set()
        reserved_text = topo.spec.res_reserved.get("cpu")
        if reserved_text:
            count = math.ceil(parse_quantity(reserved_text))
            free -= set(sorted(detail, key=lambda c: place[c])[:count])
        return cls(
            policy=topo.topology_manager_policy,
            static=topo.cpu_manager_policy == "static",
            numa_of={cpu: info.numa for cpu, info in detail.items()},
            place=place,
            free=free,
        )

    def _where(self, cpu: int) -> tuple[int, int, int]:
        return self.place.get(cpu, (0, 0, cpu))

    def take(self, request: int, numa: Iterable[int]) -> list[int]:
        """CPUs for a container: from ``numa`` first (Volcano's aligned CPUs), then any."""
        wanted = set(numa)
        aligned = sorted((c for c in self.free if self.numa_of.get(c) in wanted), key=self._where)
        chosen = aligned[:request]
        if len(chosen) < request:
            rest = sorted(self.free - set(chosen), key=self._where)
            chosen += rest[: request - len(chosen)]
        self.free -= set(chosen)
        return chosen


class NumaAwarePlugin(Plugin[NumaAwareArgs]):
    name: ClassVar[str] = "numa-aware"
    Args = NumaAwareArgs

    def on_session_open(self, ssn: SessionView) -> None:
        nodes = ssn.nodes
        topologies = ssn.snapshot.numatopologies
        known = {
            i: NodeNuma.of(topologies[name])
            for i, name in enumerate(nodes.names)
            if name in topologies
        }
        n = len(nodes)
        width = min(
            MAX_NUMA,
            1 + max((max(k.numa_of.values(), default=0) for k in known.values()), default=0),
        )
        present = np.zeros((n, width), dtype=bool)
        total = np.zeros((n, width), dtype=np.int64)
        free = np.zeros((n, width), dtype=np.int64)
        has_numa = np.zeros(n, dtype=bool)
        static = np.zeros(n, dtype=bool)
        empty_cpus = np.zeros(n, dtype=bool)
        policies = np.full(n, "", dtype=object)
        for row, numa in known.items():
            has_numa[row], static[row], policies[row] = True, numa.static, numa.policy
            empty_cpus[row] = not numa.free
            for cpu, m in numa.numa_of.items():
                if m < width:
                    present[row, m] = True
                    total[row, m] += 1
                    free[row, m] += cpu in numa.free
        masks = np.array(
            [bits for bits in itertools.product((False, True), repeat=width) if any(bits)],
            dtype=bool,
        ).reshape(-1, width)
        # sets in the order the narrowest-first choice reads them: fewer NUMA nodes, lower value
        values = masks @ (1 << np.arange(width))
        order = np.lexsort((values, masks.sum(axis=1)))
        masks, sizes = masks[order], masks.sum(axis=1)[order]
        with_policy = static & ~np.isin(policies, ["", "none"])
        state = _State(free, total, present, masks, sizes, known)
        chosen: dict[str, BoolArray] = {}

        def predicate(task: Task) -> list[Rejection]:
            if qos_rank(task.spec) != 2:
                return []
            wanted = task.annotations.get(POLICY_ANNOTATION, "")
            out: list[Rejection] = []
            if wanted and wanted != "none":
                checked = has_numa & static & (policies == wanted) & ~empty_cpus
                out += [
                    ("numa info is empty", ~has_numa),
                    ("cpu manager policy isn't static", has_numa & ~static),
                    *(
                        (
                            f"task topology polocy[{wanted}] is different with node[{p}]",
                            has_numa & static & (policies == p),
                        )
                        for p in sorted(set(policies[has_numa & static]) - {wanted})
                    ),
                    (
                        "cpu allocatable map is empty",
                        has_numa & static & (policies == wanted) & empty_cpus,
                    ),
                ]
            else:
                checked = with_policy.copy()
            if not checked.any():
                return [(r, m) for r, m in out if m.any()]
            hints, refused = state.admit(task, checked, policies)
            chosen[task.uid] = hints
            for container, bad in refused:
                msg = f"plugin numa-aware predicates failed for task {task.name}"
                out.append((f"{msg} container {container}", bad))
            return [(r, m) for r, m in out if m.any()]

        def score(task: Task, rows_: IntArray) -> Vector | float:
            wanted = task.annotations.get(POLICY_ANNOTATION, "")
            hints = chosen.get(task.uid)
            if not wanted or wanted == "none" or hints is None:
                return 0.0
            counts = hints[rows_].sum(axis=1)
            top = counts.max() if len(counts) else 0
            if top == 0:
                return np.full(len(rows_), float(MAX_NODE_SCORE * self.args.weight))
            scores: Vector = (MAX_NODE_SCORE - (MAX_NODE_SCORE * counts) // top).astype(np.float64)
            return scores * self.args.weight

        ssn.predicate_point.add(self.name, predicate)
        ssn.node_order_point.add(self.name, NodeScorer(score))
        ssn.event_handlers.add(
            self.name, EventHandler(allocate=state.place, deallocate=state.unplace)
        )


class _State:
    """Free CPUs per node and NUMA node, and the CPUs each placed task holds."""

    def __init__(
        self,
        free: IntMatrix,
        total: IntMatrix,
        present: BoolArray,
        masks: BoolArray,
        sizes: npt.NDArray[np.int64],
        known: dict[int, NodeNuma],
    ) -> None:
        self.free, self.total, self.present = free, total, present
        self.masks, self.sizes, self.known = masks, sizes, known
        self.held: dict[str, tuple[int, list[int]]] = {}
        self.valid: BoolArray = np.asarray(~(masks[None, :, :] & ~present[:, None, :]).any(axis=2))
        """Sets made only of a node's own NUMA nodes (nodes × sets)."""
        self.sets = masks.T.astype(np.int64)
        self.total_in = total @ self.sets
        """Every CPU (free or not) in each set, per node."""
        self.numa_count = present.sum(axis=1)

    def _best(
        self, free: IntMatrix, request: int, rows: slice = slice(None)
    ) -> tuple[BoolArray, BoolArray, IntMatrix]:
        """Per node of ``rows`` (``free`` holds those rows): a feasible hint exists, the best is
        preferred, and the best set (index)."""
        valid = self.valid[rows]
        feasible = valid & (free @ self.sets >= request)
        could = valid & (self.total_in[rows] >= request)
        smallest = np.where(could, self.sizes[None, :], MAX_NUMA + 1).min(axis=1)
        smallest = np.minimum(smallest, self.numa_count[rows])
        preferred = feasible & (self.sizes[None, :] == smallest[:, None])
        pick = np.where(preferred.any(axis=1), preferred.argmax(axis=1), feasible.argmax(axis=1))
        return np.asarray(feasible.any(axis=1)), np.asarray(preferred.any(axis=1)), pick

    def admit(
        self, task: Task, checked: BoolArray, policies: npt.NDArray[np.object_]
    ) -> tuple[BoolArray, list[tuple[str, BoolArray]]]:
        """The NUMA nodes of the pod's hints on every node (nodes × NUMA nodes), and where each
        container is refused."""
        free = self.free.copy()
        refused: list[tuple[str, BoolArray]] = []
        hints = np.zeros(free.shape, dtype=bool)
        ok = checked.copy()
        for container in task.spec.containers:
            request = whole_cpus(container)
            if request <= 0:
                continue
            any_hint, preferred, pick = self._best(free, request)
            single = preferred & (self.sizes[pick] == 1)
            admitted = np.where(
                policies == "restricted",
                preferred,
                np.where(policies == "single-numa-node", single, True),
            )
            bad = ok & ~admitted
            if bad.any():
                refused.append((container.name, bad))
            ok &= admitted
            chosen = np.where((any_hint & ok)[:, None], self.masks[pick], False)
            hints |= chosen
            # the next container sees this one's CPUs taken, from its set first
            left = np.full(len(free), request, dtype=np.int64)
            for m in range(free.shape[1]):
                take = np.minimum(np.where(chosen[:, m], free[:, m], 0), left)
                free[:, m] -= take
                left -= take
        return hints, refused

    def place(self, task: Task) -> None:
        numa = self.known.get(task.node)
        if numa is None or task.uid in self.held or qos_rank(task.spec) != 2:
            return
        row = task.node
        cpus: list[int] = []
        for container in task.spec.containers:
            request = whole_cpus(container)
            if request <= 0:
                continue
            # the hints of this one node only
            _, _, pick = self._best(self.free[row : row + 1], request, slice(row, row + 1))
            taken = numa.take(request, np.flatnonzero(self.masks[pick[0]]))
            self._count(row, taken, -1)
            cpus += taken
        self.held[task.uid] = (row, cpus)

    def _count(self, row: int, cpus: list[int], sign: int) -> None:
        numa_of = self.known[row].numa_of
        for cpu in cpus:
            m = numa_of.get(cpu, 0)
            if m < self.free.shape[1]:
                self.free[row, m] += sign

    def unplace(self, task: Task) -> None:
        held = self.held.pop(task.uid, None)
        if held is None:
            return
        row, cpus = held
        self.known[row].free |= set(cpus)
        self._count(row, cpus, 1)
