"""Volcano's two older GPU modes: GPUs shared by memory, or handed out whole by count.

Follows Volcano's ``gpushare`` devices (``pkg/scheduler/api/devices/nvidia/gpushare``:
``NewGPUDevices``, ``getUnhealthyGPUs``, ``getGPUMemoryOfPod``, ``getGPUNumberOfPod``,
``predicateGPUbyMemory``, ``predicateGPUbyNumber``, ``Allocate``), which pair with the
volcano-device-plugin:

- A node advertises ``volcano.sh/gpu-memory`` (the memory of all its cards) and
  ``volcano.sh/gpu-number`` (how many); every card has the same share of the memory. Cards listed
  in the node annotation ``volcano.sh/gpu-unhealthy-ids`` (``"1,3"``) are left out.
- ``deviceshare.GPUSharingEnable``: a pod's ``volcano.sh/gpu-memory`` limit (its containers' sum,
  or its largest init container's) must fit the free memory of one card; it gets the lowest such
  card.
- ``deviceshare.GPUNumberEnable``: a pod's ``volcano.sh/gpu-number`` limit is a number of cards no
  other pod uses; it gets the lowest-numbered ones (Volcano takes them in map order).
- The cards go to the pod as the annotation ``volcano.sh/gpu-index`` (``"0,1"``), with
  ``volcano.sh/predicate-time``, written with the binding; running pods' annotations say which
  cards are taken.

The cards of every node are arrays (nodes × cards), so a pod's verdict on all nodes is one step.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
import numpy.typing as npt

from caldera.api.snapshot import Snapshot
from caldera.api.task import Task
from caldera.framework.interfaces import Rejection
from caldera.models.core import PodSpec

__all__ = ["GPU_INDEX", "GPU_MEMORY", "GPU_NUMBER", "GpuShare", "pod_gpus"]

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
UNHEALTHY = "volcano.sh/gpu-unhealthy-ids"
NO_MEMORY = "GpuShare no enough gpu memory on node"
NO_CARDS = "GpuNumber no enough gpu number on node"
MAX_CARDS = 256
"""Cards per node read at most: a node advertising more (a typo, not a machine) does not make
every session allocate nodes × that many card slots."""

Mode = Literal["memory", "number"]


def pod_gpus(spec: PodSpec, resource: str) -> int:
    """The pod's limit of ``resource``: its containers' sum, or its largest init container's."""
    total = sum(int(c.resources.limits.get(resource, 0)) for c in spec.containers)
    init = max((int(c.resources.limits.get(resource, 0)) for c in spec.init_containers), default=0)
    return max(total, init)


def card_ids(text: str) -> list[int] | None:
    """A ``volcano.sh/gpu-index`` value, or None when it does not parse."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        return None


class GpuShare:
    """Every node's cards and what is taken of them, for one session."""

    def __init__(self, snapshot: Snapshot, mode: Mode) -> None:
        self.mode = mode
        self.resource = GPU_MEMORY if mode == "memory" else GPU_NUMBER
        nodes, space = snapshot.nodes, snapshot.space
        n = len(nodes)
        count = np.zeros(n, dtype=np.int64)
        total = np.zeros(n, dtype=np.float64)
        if GPU_NUMBER in space.index:
            count = np.minimum(nodes.allocatable[:, space.index[GPU_NUMBER]], MAX_CARDS)
            count = count.astype(np.int64)
        if GPU_MEMORY in space.index:
            total = nodes.allocatable[:, space.index[GPU_MEMORY]]
        width = int(count.max()) if n else 0
        slots = np.arange(width)
        self.healthy: npt.NDArray[np.bool_] = slots[None, :] < count[:, None]
        self.per_card = np.where(count > 0, total // np.maximum(count, 1), 0.0)
        self.used = np.zeros((n, width), dtype=np.float64)
        self.pods = np.zeros((n, width), dtype=np.int64)
        self.held: dict[str, tuple[int, list[int]]] = {}
        for row in np.flatnonzero(count):  # only nodes with cards have cards to take or lose
            for card in card_ids(nodes.annotations[row].get(UNHEALTHY, "")) or []:
                if 0 <= card < width:
                    self.healthy[row, card] = False
            for task in nodes.tasks[row].values():
                text = task.annotations.get(GPU_INDEX)
                if text is not None and self._request(task) > 0:
                    self._take(task, int(row), [c for c in card_ids(text) or [] if c < width])

    def _request(self, task: Task) -> int:
        return pod_gpus(task.spec, self.resource)

    def _take(self, task: Task, row: int, cards: list[int]) -> None:
        memory = pod_gpus(task.spec, GPU_MEMORY)
        for card in cards:
            self.pods[row, card] += 1
            self.used[row, card] += memory
        self.held[task.uid] = (row, cards)

    def _fits(self, request: int) -> npt.NDArray[np.bool_]:
        if self.mode == "memory":
            free = self.per_card[:, None] - self.used
            return np.asarray((self.healthy & (free >= request)).any(axis=1))
        idle = self.healthy & (self.pods == 0)
        return np.asarray(idle.sum(axis=1) >= request)

    def predicate(self, task: Task) -> list[Rejection]:
        request = self._request(task)
        if request <= 0:
            return []
        bad = ~self._fits(request)
        if not bad.any():
            return []
        return [(NO_MEMORY if self.mode == "memory" else NO_CARDS, bad)]

    def allocate(self, task: Task) -> None:
        """The cards of a task just placed, on its binding (Volcano's ``Allocate``)."""
        request = self._request(task)
        if request <= 0 or task.node < 0 or task.uid in self.held:
            return
        row = task.node
        if self.mode == "memory":
            free = self.per_card[row] - self.used[row]
            cards = list(np.flatnonzero(self.healthy[row] & (free >= request))[:1])
        else:
            idle = np.flatnonzero(self.healthy[row] & (self.pods[row] == 0))
            cards = list(idle[:request]) if len(idle) >= request else []
        if not cards:
            return
        chosen = [int(c) for c in cards]
        self._take(task, row, chosen)
        task.bind_annotations[GPU_INDEX] = ",".join(map(str, chosen))
        task.bind_annotations[PREDICATE_TIME] = str(time.time_ns())

    def release(self, task: Task) -> None:
        """A placement undone: its cards are free again."""
        held = self.held.pop(task.uid, None)
        if held is None:
            return
        row, cards = held
        memory = pod_gpus(task.spec, GPU_MEMORY)
        for card in cards:
            self.pods[row, card] -= 1
            self.used[row, card] -= memory
        task.bind_annotations.pop(GPU_INDEX, None)
        task.bind_annotations.pop(PREDICATE_TIME, None)
