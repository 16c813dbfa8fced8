"""Binds the scheduler has decided but the watch has not confirmed yet (assume / forget).

A session must never place a pod whose bind is still in flight, and must count it on its node. So
each decided bind is *assumed*: the next snapshots see the pod on that node until the watch shows
the pod bound (confirmed) or the binder gives up on it (forgotten). An assumption the watch never
confirms expires after a while, so a lost event cannot pin a pod forever.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from caldera.models.core import Pod

__all__ = ["Assumptions"]


@dataclass(slots=True)
class _Assumed:
    node: str
    since: float


class Assumptions:
    def __init__(self, ttl: float = 60.0) -> None:
        self._ttl = ttl
        self._pods: dict[str, _Assumed] = {}

    def assume(self, key: str, node: str) -> None:
        self._pods[key] = _Assumed(node, time.monotonic())

    def forget(self, key: str) -> None:
        self._pods.pop(key, None)

    def node_of(self, key: str) -> str | None:
        entry = self._pods.get(key)
        return entry.node if entry else None

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def overlay(self, pods: dict[str, Pod]) -> dict[str, Pod]:
        """``pods`` with assumed binds applied; confirmed, vanished and expired ones dropped."""
        now = time.monotonic()
        out = dict(pods)
        for key, entry in list(self._pods.items()):
            pod = pods.get(key)
            if pod is None or pod.spec.node_name or now - entry.since > self._ttl:
                del self._pods[key]
                continue
            out[key] = pod.model_copy(
                update={"spec": pod.spec.model_copy(update={"node_name": entry.node})}
            )
        return out
