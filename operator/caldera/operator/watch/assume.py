"""Binds the scheduler has decided but the watch has not confirmed yet (assume / forget).

A session must never place a pod whose bind is still in flight, and must count it on its node. So
each decided bind is *assumed*: the next snapshots see the pod on that node, with the annotations
the binder writes before binding it (the shared cards it holds), until the watch shows
the pod bound (confirmed), the pod is gone (or replaced by a new pod of the same name), or the
binder gives up on it (forgotten). No clock ends an assumption: however far the watch lags, a pod
whose bind is in flight is never offered to a second session, and a bind the binder could not
make is forgotten by the binder, which knows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from caldera.api.task import has_queue_gate, without_queue_gate
from caldera.models.core import Pod, PodCondition
from caldera.models.workload import DISRUPTION_TARGET, REASON_PREEMPTION

__all__ = ["Assumptions", "InFlight", "changed_pods", "overlaid"]

InFlight = dict[str, tuple[str, dict[str, str]]]
"""Pod → (node, annotations written with its bind) for binds still in flight."""
PREEMPTED = PodCondition(type=DISRUPTION_TARGET, status="True", reason=REASON_PREEMPTION)
"""The condition the evictor writes on a pod before deleting it."""


@dataclass(frozen=True, slots=True)
class _Assumed:
    node: str
    uid: str
    annotations: dict[str, str]


class Assumptions:
    def __init__(self) -> None:
        self._pods: dict[str, _Assumed] = {}
        self._evicting: dict[str, str] = {}
        """Pods the evictor has been given, by key → uid, until the API shows them terminating
        or gone: sessions see them as releasing, so none is chosen as a victim twice."""
        self._lifting: dict[str, str] = {}
        """Pods whose queue-allocation gate is being lifted, by key → uid, until the API shows
        it gone: sessions see them lifted, so they hold their queue's room from the moment the
        lift is decided (a lagging watch never lets their room be given twice)."""

    def lifting(self, key: str, uid: str) -> None:
        self._lifting[key] = uid

    def lift_failed(self, key: str) -> None:
        self._lifting.pop(key, None)

    def current_lifts(self, pods: Mapping[str, Pod]) -> list[str]:
        """Pods whose gate lift is under way but not yet visible; the rest are dropped."""
        return _under_way(
            self._lifting,
            pods,
            lambda pod: not has_queue_gate(pod.spec),
        )

    def evicting(self, key: str, uid: str) -> None:
        self._evicting[key] = uid

    def current_evictions(self, pods: Mapping[str, Pod]) -> list[str]:
        """Pods whose eviction is under way but not yet visible; the rest are dropped."""
        return _under_way(
            self._evicting, pods, lambda pod: pod.metadata.deletion_timestamp is not None
        )

    def assume(
        self, key: str, node: str, uid: str = "", annotations: dict[str, str] | None = None
    ) -> None:
        self._pods[key] = _Assumed(node, uid, annotations or {})

    def forget(self, key: str) -> None:
        self._pods.pop(key, None)

    def node_of(self, key: str) -> str | None:
        entry = self._pods.get(key)
        return entry.node if entry else None

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def current(self, pods: Mapping[str, Pod]) -> InFlight:
        """The binds still in flight; confirmed and vanished ones are dropped.

        Cheap (dictionary work only), so it runs on the event loop; :func:`apply` does the
        copying off the loop.
        """
        out: InFlight = {}
        for key, entry in list(self._pods.items()):
            pod = pods.get(key)
            if (
                pod is None
                or pod.spec.node_name
                or (entry.uid and pod.metadata.uid and pod.metadata.uid != entry.uid)
            ):
                del self._pods[key]
            else:
                out[key] = (entry.node, entry.annotations)
        return out

    def overlay(self, pods: dict[str, Pod]) -> dict[str, Pod]:
        """A copy of ``pods`` with the assumed binds applied (:meth:`current`, then
        :func:`changed_pods`)."""
        return {**pods, **changed_pods(pods, self.current(pods))}


def _under_way(
    pending: dict[str, str], pods: Mapping[str, Pod], done: Callable[[Pod], bool]
) -> list[str]:
    """The keys of ``pending`` (pod → UID) whose change the cache does not show yet; those
    shown ``done``, gone, or replaced by a new pod of the same name are dropped."""
    out = []
    for key, uid in list(pending.items()):
        pod = pods.get(key)
        if pod is None or done(pod) or (uid and pod.metadata.uid and pod.metadata.uid != uid):
            del pending[key]
        else:
            out.append(key)
    return out


@contextlib.contextmanager
def overlaid(pods: dict[str, Pod], changes: Mapping[str, Pod]) -> Iterator[dict[str, Pod]]:
    """``pods`` with ``changes`` (from :func:`changed_pods`) made in it
    for the length of the block, and undone after it: a session costs the pods in flight, not a
    copy of every pod in the cluster. ``pods`` must be the session's own (nothing else may read
    it meanwhile)."""
    saved = {key: pods[key] for key in changes}
    pods.update(changes)
    try:
        yield pods
    finally:
        pods.update(saved)


def changed_pods(
    pods: Mapping[str, Pod],
    assumed: InFlight,
    evicting: Sequence[str] = (),
    now: float = 0.0,
    lifting: Sequence[str] = (),
) -> dict[str, Pod]:
    """The pods that change in a session's view of ``pods``: each assumed pod sits on its node,
    with its annotations; each pod being evicted is terminating (since ``now``), with the
    evictor's ``DisruptionTarget`` condition; each pod whose gate is being lifted has lost it."""
    out: dict[str, Pod] = {}
    for key in lifting:
        pod = pods.get(key)
        if pod is not None:
            out[key] = without_queue_gate(pod)
    for key in evicting:
        pod = out.get(key) or pods.get(key)
        if pod is not None and pod.metadata.deletion_timestamp is None:
            meta = pod.metadata.model_copy(update={"deletion_timestamp": now})
            terminating: dict[str, object] = {"metadata": meta}
            if pod.status.condition(DISRUPTION_TARGET) is None:
                conditions = (*pod.status.conditions, PREEMPTED)
                terminating["status"] = pod.status.model_copy(update={"conditions": conditions})
            out[key] = pod.model_copy(update=terminating)
    for key, (node, written) in assumed.items():
        pod = out.get(key) or pods[key]
        update: dict[str, object] = {"spec": pod.spec.model_copy(update={"node_name": node})}
        if written:
            merged = {**pod.metadata.annotations, **written}
            update["metadata"] = pod.metadata.model_copy(update={"annotations": merged})
        out[key] = pod.model_copy(update=update)
    return out
