"""deviceshare's Ascend 310P vNPUs the MindCluster way: ``deviceshare.AscendMindClusterVNPUEnable``.

Volcano's deviceshare ``OnSessionOpen`` with the flag on (``pkg/scheduler/plugins/deviceshare/
deviceshare.go`` at ed72c7c8), on the engine of :mod:`caldera.devices.mindcluster`: every node's
vNPU state is opened for the session (``InitVNPUDevice``) from the node, the pods on it, the
``init-params`` entry of the policy's ``configurations`` and MindCluster's ConfigMaps (the
snapshot's, as the operator's informers or a manifest give them), and then:

- **predicate** (``AddPredicateFn``, ``FilterNode``): a pod asking for vNPUs (the label
  ``ring-controller.atlas: ascend-310P`` and a ``huawei.com/npu-core`` limit) is refused a node
  with Volcano's reason (``preCheckNodePredicate failure``) or, where Volcano gives an empty one,
  its error message. Evicting pods never cures it (Volcano's status code ``Error``), so victim
  searches pass such a node over;
- **allocate and deallocate** (the predicates plugin's event handlers in Volcano, which call the
  device's ``Allocate`` and ``Release``): the chips are picked and written on the pod as
  ``huawei.com/npu-core`` and ``predicate-time`` for the binder, and given back when the
  placement is undone;
- **node order** (``AddBatchNodeOrderFn``, ``ScoreBatchNodes``), only when
  ``deviceshare.ScheduleWeight`` is above 0: 8 (or 16) to the candidate with the least idle
  ``huawei.com/npu-core``, times the weight.

``huawei.com/npu-core`` stays an ordinary resource that the generic fit checks, as in Volcano.

Differences from Volcano, each deliberate:

- Volcano rolls a placement back when ``Allocate`` fails (no chip meets the request: a 3-core pod,
  which no template fits, passes ``FilterNode`` and fails there, as does a vNPU whose chips are
  free only in sum), and the pod waits for the next session even when another node would do. Here
  allocation cannot fail: the predicate also refuses a node where ``Allocate`` would (it asks the
  node which chips it would pick, which changes nothing), so the pod goes to a node that can hold
  it. Stricter than Volcano, whose filter lets such nodes through.
- A running pod whose eviction is undone keeps the chips its annotation names (Volcano's
  ``Allocate`` would pick chips for it again); a released pod's chips are freed once (Volcano
  frees them in ``RemoveTask`` and again in ``Release``); a placement undone gives back the chips
  it was given, even when the pending pod carries a stale ``huawei.com/npu-core`` of its own (a
  bind that failed after the annotations were written; Volcano frees the chips that one names).
- A node reporting 0 ``huawei.com/npu-core`` reads as one without it (``not have
  huawei.com/npu-core``); the node's capacity is read from its allocatable, which a kubelet
  reports equal for extended resources.
- The ConfigMaps are read anew every session, in key order, from what the cluster holds now;
  Volcano's informer keeps what an unreadable update replaced and the order events came in.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task, TaskStatus
from caldera.devices.mindcluster import NpuNode, score_nodes
from caldera.devices.mindcluster_chip import (
    HW_PREFIX,
    NPU_CORE,
    RING_LABEL,
    MindClusterError,
    NpuPod,
    asks,
    downgrade,
    read_pod,
)
from caldera.devices.mindcluster_info import ClusterInfo, ConfigMapView, InitParams
from caldera.devices.mindcluster_node import NodeInputs, open_node
from caldera.framework.interfaces import EventHandler, IntArray, Rejection, SessionView
from caldera.framework.scoring import NodeScorer

__all__ = ["PLUGIN", "MindClusterVNpus", "open_mindcluster", "task_pod"]

PLUGIN = "deviceshare"
"""The plugin whose extension points the vNPUs register on (Volcano's deviceshare)."""

BoolArray = npt.NDArray[np.bool_]
_NOT_COUNTED = frozenset({TaskStatus.RELEASING, TaskStatus.PIPELINED})
"""States whose pods a node's ``AddTask`` does not count on its devices."""
_FINISHED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
_PLACED = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})
"""States a placement of this session gives a task (any other, on an allocate event: a running
pod whose eviction was undone)."""


def open_mindcluster(ssn: SessionView, weight: int, plugin: str = PLUGIN) -> None:
    """Register the vNPUs' predicate, event handlers and (``weight`` above 0: Volcano's
    ``deviceshare.ScheduleWeight``) node order on ``ssn``, as ``plugin``."""
    vnpus = MindClusterVNpus(ssn)
    ssn.predicate_point.add(plugin, vnpus.predicate)
    ssn.event_handlers.add(plugin, EventHandler(allocate=vnpus.allocate, deallocate=vnpus.release))
    if weight > 0:
        ssn.node_order_point.add(plugin, NodeScorer(functools.partial(vnpus.score, weight=weight)))


def task_pod(task: Task) -> NpuPod:
    """What the vNPU code reads of ``task``'s pod: its own annotations (not the ones this
    session means to bind with), its app containers' requests and limits."""
    spec = task.spec
    containers = [(c.resources.effective(), c.resources.limits) for c in spec.containers]
    requested = {
        name for c in (*spec.containers, *spec.init_containers) for name in c.resources.effective()
    }
    return read_pod(
        task.uid,
        task.name,
        task.labels,
        task.annotations,
        containers,
        sorted(requested),
        counted=task.status not in _NOT_COUNTED,
        namespace=task.namespace,
        active=task.status not in _FINISHED,
    )


def _vnpu_pod(task: Task) -> NpuPod | None:
    """``task``'s pod when it asks for vNPUs (``HasDeviceRequest``), else None; a pod without
    the ``ring-controller.atlas`` label is passed over at once."""
    if RING_LABEL not in task.labels:
        return None
    pod = task_pod(task)
    return pod if asks(pod) else None


def _bears_on_npus(task: Task) -> bool:
    """Whether ``task``'s pod can change a node's vNPU state: it asks for vNPUs, or names
    chips in a ``huawei.com/`` annotation. Every other pod is passed over when the nodes open."""
    return RING_LABEL in task.labels or any(k.startswith(HW_PREFIX) for k in task.annotations)


class MindClusterVNpus:
    """Every node's vNPU state for one session, opened the first time a pod asks (a session
    without vNPU pods never reads a ConfigMap)."""

    def __init__(self, ssn: SessionView) -> None:
        self._ssn = ssn
        self._nodes: list[NpuNode] | None = None
        self._cores: list[bool] = []
        """Per node row, whether it has ``huawei.com/npu-core`` at all."""
        self._params = InitParams.from_policy(list(ssn.policy.configurations))
        self._column = ssn.space.index.get(NPU_CORE)

    @property
    def nodes(self) -> list[NpuNode]:
        """Per node row, its vNPU state (``InitVNPUDevice``)."""
        if self._nodes is None:
            self._nodes = self._open()
        return self._nodes

    def _open(self) -> list[NpuNode]:
        ssn = self._ssn
        cluster = ClusterInfo(self._params.use_cluster_d)
        held = ssn.snapshot.config_maps
        for key in sorted(held):
            meta = held[key].metadata
            view = ConfigMapView(meta.namespace, meta.name, meta.labels, held[key].data or {})
            cluster.update(view)
        table = ssn.nodes
        out: list[NpuNode] = []
        for row, name in enumerate(table.names):
            pods = [task_pod(t) for t in table.tasks[row].values() if _bears_on_npus(t)]
            capacity = self._capacity(row)
            self._cores.append(NPU_CORE in capacity)
            inputs = NodeInputs(name, table.labels[row], table.annotations[row], capacity)
            out.append(open_node(inputs, pods, cluster, self._params, ssn.now))
        return out

    def _capacity(self, row: int) -> Mapping[str, float]:
        """The node's ``huawei.com/`` resources (``getNPUNodeCapacity``), read from its
        allocatable; those deviceshare withholds from the generic fit too."""
        table = self._ssn.nodes
        names = table.space.names
        out = {
            names[col]: float(value)
            for col, value in enumerate(table.allocatable[row].tolist())
            if value > 0 and HW_PREFIX in names[col]
        }
        out.update((k, v) for k, v in table.withheld[row].items() if v > 0 and HW_PREFIX in k)
        return out

    def _idle(self, row: int, node: NpuNode) -> float | None:
        """The node's idle ``huawei.com/npu-core`` now (None: it has none)."""
        if self._column is None or not node.idle_known or not self._cores[row]:
            return None
        return float(self._ssn.nodes.idle[row, self._column])

    # -- predicate ------------------------------------------------------------------------

    def predicate(self, task: Task) -> list[Rejection]:
        """``FilterNode`` on every node, then the allocation's own check (see the module's
        docstring): one rejection per reason."""
        pod = _vnpu_pod(task)
        if pod is None:
            return []
        masks: dict[str, BoolArray] = {}
        nodes = self.nodes
        for row, node in enumerate(nodes):
            why = self.refusal(node, row, pod)
            if why is not None:
                mask = masks.get(why)
                if mask is None:
                    mask = masks[why] = np.zeros(len(nodes), dtype=np.bool_)
                mask[row] = True
        return list(masks.items())

    def refusal(self, node: NpuNode, row: int, pod: NpuPod) -> str | None:
        """Why ``pod`` may not go to ``node`` (row ``row``), None when it may."""
        refused = node.filter(pod, self._idle(row, node))
        if refused is not None:
            return refused.reason or refused.message
        try:  # Allocate's failing half: SelectChipFromNode reads the node, changes nothing
            res = node.pod_resource(pod)
            node.select(downgrade(res) if pod.name in node.downgraded else res)
        except MindClusterError as exc:
            return str(exc)
        return None

    # -- allocate / deallocate -------------------------------------------------------------

    def allocate(self, task: Task) -> None:
        """A task placed: its chips taken and written on it for the binder (``Allocate``)."""
        pod = _vnpu_pod(task)
        if pod is None or task.node < 0:
            return
        node = self.nodes[task.node]
        if pod.uid in node.allocation:
            return
        if task.status not in _PLACED:  # a running pod put back (its eviction undone)
            node.add(pod, pod.annotations)
            return
        try:
            task.bind_annotations.update(node.allocate(pod, self._ssn.now))
        except MindClusterError:  # the predicate refuses such nodes
            return

    def release(self, task: Task) -> None:
        """A placement undone, or a running pod evicted: its chips given back (``Release``)."""
        pod = _vnpu_pod(task)
        if pod is None or task.node < 0:
            return
        if task.status is TaskStatus.PENDING:
            # a placement undone: what this session gave it, not a stale annotation of its own
            notes = {k: v for k, v in pod.annotations.items() if k != NPU_CORE}
            pod = dataclasses.replace(pod, annotations=notes)
        for key in self.nodes[task.node].release(pod):
            task.bind_annotations.pop(key, None)

    # -- node order -----------------------------------------------------------------------

    def score(self, task: Task, rows: IntArray, *, weight: int) -> npt.NDArray[np.float64] | float:
        """``ScoreBatchNodes`` over the candidates, times ``weight``."""
        pod = _vnpu_pod(task)
        if pod is None or not len(rows):
            return 0.0
        nodes = self.nodes
        picked = [(nodes[row], self._idle(row, nodes[row])) for row in rows.tolist()]
        scores: npt.NDArray[np.float64] = np.array(score_nodes(pod.name, picked)) * weight
        return scores
