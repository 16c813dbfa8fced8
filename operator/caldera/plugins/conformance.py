"""conformance: never pick critical pods (system priority classes, kube-system) as victims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from caldera.api.task import Task
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT
from caldera.framework.session import Session

__all__ = ["ConformancePlugin"]

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def _evictable(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
    victims = [
        t
        for t in candidates
        if t.spec.priority_class_name not in CRITICAL_CLASSES and t.namespace != SYSTEM_NAMESPACE
    ]
    return victims, PERMIT


class ConformancePlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        ssn.preemptable_point.add(self.name, _evictable)
        ssn.reclaimable_point.add(self.name, _evictable)
