"""The JSON an extender receives: Volcano's ``TaskInfo``, ``NodeInfo``, ``JobInfo`` and
``QueueInfo`` as Go's ``encoding/json`` writes them (no json tags: the keys are the Go field
names, ``UID``, ``Resreq``, ``Idle``...; embedded Kubernetes objects in their API form).

An existing extender server reads these names, so they carry over. What Caldera leaves out,
because it does not keep it or because it would multiply every body's size:

- a task's ``Pod`` carries its metadata and the scheduling part of its spec (containers with
  their resources, node selector, affinity, tolerations, priority, scheduler name);
- the tasks listed inside a node (``NodeInfo.Tasks``) or a job (``JobInfo.Tasks``) carry
  ``UID``, ``Job``, ``Name``, ``Namespace``, ``Resreq``, ``NodeName``, ``Status`` and
  ``Priority``, not their pod (a node's body would otherwise grow by a pod per pod it runs);
- a node's ``Node`` carries its name, labels, annotations, taints, unschedulable flag,
  allocatable and capacity.

Rendering is cached for the session: a node is rendered again only after it changed (the node
table's change log), a task only when its state or node changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.resources import CPU, MEMORY, PODS, ResourceSpace, Vector
from caldera.api.task import Gate, Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.quantity import format_resource

__all__ = ["Wire", "body"]

_SPEC_SENT = frozenset(
    {"schedulerName", "nodeSelector", "affinity", "tolerations", "priority", "priorityClassName"}
)
"""The pod spec's fields an extender is sent besides its containers (as Volcano's wire does)."""

_STATUS_BITS = {status: 1 << i for i, status in enumerate(TaskStatus)}
"""Volcano's ``TaskStatus`` values: a bit per state, in declaration order (Pending = 1)."""
_READY = {"Phase": 1, "Reason": ""}


class _Raw:
    """Already-rendered JSON, spliced into a body as it is: the pieces of a cached node, or of a
    list or map of them (joined once, with the whole body)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts


def _pieces(value: Any, out: list[bytes]) -> None:
    if isinstance(value, _Raw):
        out += value.parts
    elif isinstance(value, dict) and value and isinstance(next(iter(value.values())), _Raw):
        out.append(b"{")
        for i, (key, raw) in enumerate(value.items()):
            out += (b"," if i else b"", orjson.dumps(key), b":", *raw.parts)
        out.append(b"}")
    else:
        out.append(orjson.dumps(value))


def body(**fields: Any) -> bytes:
    """A request body: a JSON object of ``fields`` (cached nodes spliced in as rendered), built
    with one copy of its pieces."""
    out = [b"{"]
    for i, (key, value) in enumerate(fields.items()):
        out += (b"," if i else b"", orjson.dumps(key), b":")
        _pieces(value, out)
    out.append(b"}")
    return b"".join(out)


def _time(seconds: float) -> str | None:
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource(space: ResourceSpace, vec: Vector) -> dict[str, Any]:
    """Volcano's ``Resource``: millicores, bytes, other resources in thousandths (numbers as Go
    writes a float64: ``3000``, not ``3000.0``)."""
    values = vec.tolist()
    scalars = {
        name: _go(values[i] * 1000)
        for i, name in enumerate(space.names)
        if name not in (CPU, MEMORY, PODS) and values[i]
    }
    pods = space.index.get(PODS)
    return {
        "MilliCPU": _go(values[0]),
        "Memory": _go(values[1]),
        "ScalarResources": scalars or None,
        "MaxTaskNum": int(values[pods]) if pods is not None else 0,
    }


def _go(value: float) -> float | int:
    return int(value) if value.is_integer() else value


def resource_list(space: ResourceSpace, vec: Vector | None) -> dict[str, str] | None:
    """A Kubernetes ResourceList of the finite, non-zero entries (None: nothing set)."""
    if vec is None:
        return None
    out = {
        name: format_resource(name, float(vec[i]))
        for i, name in enumerate(space.names)
        if name != PODS and vec[i] and math.isfinite(vec[i])
    }
    return out or None


def _quantities(values: Mapping[str, float]) -> dict[str, str]:
    return {name: format_resource(name, value) for name, value in values.items()}


class Wire:
    """Renders the session's objects for one extender's calls."""

    def __init__(self, ssn: SessionView) -> None:
        self.ssn = ssn
        self.space = ssn.space
        self._nodes: dict[int, bytes] = {}
        self._seen = len(ssn.nodes.changes)
        self._pods: dict[str, dict[str, Any]] = {}

    # -- tasks ---------------------------------------------------------------------------------

    def _meta(self, task: Task) -> dict[str, Any]:
        return {
            "name": task.name,
            "namespace": task.namespace,
            "uid": task.uid,
            "labels": task.labels or None,
            "annotations": task.annotations or None,
        }

    def pod(self, task: Task) -> dict[str, Any]:
        pod = self._pods.get(task.uid)
        if pod is None:
            spec = {k: v for k, v in task.spec.model_dump().items() if k in _SPEC_SENT}
            spec["containers"] = [self._container(c) for c in task.spec.containers]
            if task.spec.init_containers:
                spec["initContainers"] = [self._container(c) for c in task.spec.init_containers]
            pod = self._pods[task.uid] = {"metadata": self._meta(task), "spec": spec}
        pod["spec"]["nodeName"] = task.node_name or None
        return pod

    def _container(self, container: Any) -> dict[str, Any]:
        res = container.resources
        out: dict[str, Any] = {"name": container.name}
        if container.image:
            out["image"] = container.image
        requests = _quantities(res.requests)
        limits = _quantities(res.limits)
        out["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
        return out

    def brief(self, task: Task) -> dict[str, Any]:
        """A ``TaskInfo`` listed inside a node or a job: who it is, what it holds, its state."""
        return {
            "UID": task.uid,
            "Job": task.job,
            "Name": task.name,
            "Namespace": task.namespace,
            "Resreq": resource(self.space, task.resreq),
            "NodeName": task.node_name,
            "Status": _STATUS_BITS[task.status],
            "Priority": task.priority,
        }

    def task(self, task: Task) -> dict[str, Any]:
        """``TaskInfo`` of a task asked about: :meth:`brief`, with its pod and flags."""
        info = self.brief(task)
        info.update(
            TaskRole=task.role,
            InitResreq=info["Resreq"],
            Preemptable=task.preemptable,
            BestEffort=task.best_effort,
            SchGated=task.gate in (Gate.OTHER, Gate.QUEUE),
            Pod=self.pod(task),
        )
        return info

    # -- nodes ---------------------------------------------------------------------------------

    def node(self, row: int) -> _Raw:
        """``NodeInfo`` of node ``row``, rendered again only once it changed."""
        return _Raw([self._rendered(row)])

    def nodes(self, rows: Any) -> _Raw:
        """A JSON list of the ``NodeInfo`` of ``rows``."""
        cache, render = self._current(), self._rendered
        parts = [b"["]
        for i, row in enumerate(np.asarray(rows).tolist()):
            parts += (b"," if i else b"", cache.get(row) or render(row))
        parts.append(b"]")
        return _Raw(parts)

    def _current(self) -> dict[int, bytes]:
        """The cache, without the nodes changed since it was last looked at."""
        log = self.ssn.nodes.changes
        if len(log) > self._seen:
            for changed in log[self._seen :]:
                self._nodes.pop(changed, None)
            self._seen = len(log)
        return self._nodes

    def _rendered(self, row: int) -> bytes:
        cache = self._current()
        data = cache.get(row)
        if data is None:
            data = cache[row] = orjson.dumps(self._node(row))
        return data

    def _node(self, row: int) -> dict[str, Any]:
        nodes, space = self.ssn.nodes, self.space
        name = nodes.names[row]
        allocatable = resource_list(space, nodes.allocatable[row])
        usage = self.ssn.snapshot.node_usage.get(name)
        return {
            "Name": name,
            "Node": {
                "metadata": {
                    "name": name,
                    "labels": nodes.labels[row] or None,
                    "annotations": nodes.annotations[row] or None,
                },
                "spec": {
                    "unschedulable": bool(nodes.unschedulable[row]) or None,
                    "taints": [t.model_dump() for t in nodes.taints[row]] or None,
                },
                "status": {"allocatable": allocatable, "capacity": allocatable},
            },
            "State": _READY,
            "Releasing": resource(space, nodes.releasing[row]),
            "Pipelined": resource(space, nodes.pipelined[row]),
            "Idle": resource(space, nodes.idle[row]),
            "Used": resource(space, nodes.used[row]),
            "Allocatable": resource(space, nodes.allocatable[row]),
            "Capacity": resource(space, nodes.allocatable[row]),
            "ResourceUsage": {
                "CPUUsageAvg": {"10m": usage.cpu} if usage else {},
                "MEMUsageAvg": {"10m": usage.memory} if usage else {},
            },
            "Tasks": {uid: self.brief(t) for uid, t in nodes.tasks[row].items()},
        }

    # -- jobs and queues -----------------------------------------------------------------------

    def job(self, job: Job) -> dict[str, Any]:
        space = self.space
        tasks = {uid: self.brief(t) for uid, t in job.tasks.items()}
        by_status = {
            str(_STATUS_BITS[status]): {uid: tasks[uid] for uid in members}
            for status, members in job.by_status.items()
            if members
        }
        total = space.zeros()
        for t in job.tasks.values():
            total += t.resreq
        return {
            "UID": job.uid,
            "Name": job.name,
            "Namespace": job.namespace,
            "Queue": job.queue,
            "Priority": job.priority,
            "MinAvailable": job.min_available,
            "TaskMinAvailable": job.min_task_member or None,
            "TaskStatusIndex": by_status,
            "Tasks": tasks,
            "Allocated": resource(space, job.allocated),
            "TotalRequest": resource(space, total),
            "CreationTimestamp": _time(job.creation),
            "PodGroup": {
                "metadata": {
                    "name": job.name,
                    "namespace": job.namespace,
                    "annotations": job.annotations or None,
                },
                "spec": {
                    "minMember": job.min_available,
                    "queue": job.queue,
                    "minResources": resource_list(space, job.min_resources),
                },
                "status": {"phase": job.phase},
            },
        }

    def queue(self, queue: Queue) -> dict[str, Any]:
        space = self.space
        return {
            "UID": queue.uid,
            "Name": queue.name,
            "Weight": queue.weight,
            "Parent": queue.parent,
            "Capability": resource_list(space, queue.capability),
            "Guarantee": resource_list(space, queue.guarantee),
            "Deserved": resource_list(space, queue.deserved_spec),
            "ReclaimableFlag": queue.reclaimable,
            "Priority": queue.priority,
            "State": queue.state,
            "Allocated": _quantities(queue.status_allocated) or None,
            "Annotations": queue.annotations or None,
            "CreationTimestamp": _time(queue.creation),
        }

    def session(self) -> dict[str, Any]:
        """``OnSessionOpenRequest``: every job, node and queue of the session."""
        ssn = self.ssn
        return {
            "Jobs": {uid: self.job(job) for uid, job in ssn.jobs.items()},
            "Nodes": {name: self.node(row) for row, name in enumerate(ssn.nodes.names)},
            "Queues": {q.uid or name: self.queue(q) for name, q in ssn.queues.items()},
            "NamespaceInfo": {},
            "RevocableNodes": {},
            "NodeList": list(ssn.nodes.names),
        }
