"""conformance: never pick critical pods (system priority classes, kube-system) as victims.

Volcano's conformance answers every ``Preemptable`` and ``Reclaimable`` call with the candidates
it keeps, so in a tier above ``capacity`` or ``proportion`` it decides the victims alone: the
first tier with victims wins, and the quota plugins below never see the call (volcano#5896: a
queue within its deserved share loses pods to reclaim). That stays the default.
``conformance.abstainWhenNoneProtected: true`` (Caldera's) has it abstain whenever it protects
none of the candidates, as volcano PR #5897 proposed, so the plugins of its tier or the next
one decide; it still removes critical pods wherever there are some.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from caldera.api.task import Task
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import ABSTAIN, PERMIT

__all__ = ["ConformanceArgs", "ConformancePlugin"]

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


class ConformanceArgs(Args):
    abstain_when_none_protected: bool = Field(False, alias="conformance.abstainWhenNoneProtected")
    """Abstain from a victim choice that protects no candidate, so lower tiers decide
    (volcano#5896). Off is Volcano's behaviour."""


def _kept(candidates: Sequence[Task]) -> list[Task]:
    """``evictableFn``: the candidates that are neither of a system priority class nor in
    kube-system."""
    return [
        t
        for t in candidates
        if t.spec.priority_class_name not in CRITICAL_CLASSES and t.namespace != SYSTEM_NAMESPACE
    ]


def _evictable(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
    return _kept(candidates), PERMIT


def _evictable_or_abstain(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
    victims = _kept(candidates)
    return victims, ABSTAIN if len(victims) == len(candidates) else PERMIT


class ConformancePlugin(Plugin[ConformanceArgs]):
    name: ClassVar[str] = "conformance"
    Args = ConformanceArgs

    def on_session_open(self, ssn: SessionView) -> None:
        fn = _evictable_or_abstain if self.args.abstain_when_none_protected else _evictable
        ssn.preemptable_point.add(self.name, fn)
        ssn.reclaimable_point.add(self.name, fn)
