"""The cluster as one scheduling session sees it.

A snapshot is built fresh for every session (from the operator's cache or from manifests) and then
belongs to that session alone: the session mutates it freely and throws it away. That is what lets
the engine be a plain synchronous function of its input.
"""

from __future__ import annotations

from dataclasses import dataclass

from caldera.api.job import Job
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector

__all__ = ["Snapshot"]


@dataclass(slots=True, eq=False)
class Snapshot:
    space: ResourceSpace
    nodes: NodeTable
    jobs: dict[str, Job]
    queues: dict[str, Queue]
    now: float
    """Seconds since the epoch at session start (injected, so simulation is reproducible)."""
    session_id: str

    def total_allocatable(self) -> Vector:
        return self.nodes.total()
