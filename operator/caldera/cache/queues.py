"""The queues every Volcano-compatible scheduler guarantees: ``root`` and the default queue.

Volcano's scheduler creates them at startup if missing (``root``: not reclaimable; default:
reclaimable; both weight 1), and every other queue without a parent hangs under ``root``.
"""

from __future__ import annotations

from caldera.cache.state import ClusterState
from caldera.models.volcano import Queue

__all__ = ["ROOT_QUEUE", "builtin_queue", "ensure_builtin_queues"]

ROOT_QUEUE = "root"


def builtin_queue(name: str, *, created: float | None = None) -> Queue:
    return Queue.model_validate(
        {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"weight": 1, "reclaimable": name != ROOT_QUEUE},
            "status": {"state": "Open"},
        }
    )


def ensure_builtin_queues(
    state: ClusterState, default_queue: str, *, created: float | None = None
) -> list[str]:
    """Add ``root`` and the default queue when absent; returns the names added."""
    added = []
    for name in (ROOT_QUEUE, default_queue):
        if name not in state.queues:
            state.queues[name] = builtin_queue(name, created=created)
            added.append(name)
    return added
