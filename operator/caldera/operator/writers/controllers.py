"""The controller duties Volcano leaves to other components, done here because users run only us.

- ``root`` and the default queue exist (created at startup, ``root`` recreated if deleted);
- every queue has ``status.state`` (``Open`` when unset) and, except ``root``, ``spec.parent``
  (``root`` when unset);
- a ``Closing`` queue (``caldera queue close``) becomes ``Closed`` once nothing is in it: no
  PodGroup names it and no unfinished pod of ours without a PodGroup object is in it (the
  PodGroup Volcano's pg-controller would have made for such a pod; the garbage collector
  deletes that one with its pod). That is Volcano's queue controller's rule (its ``closing``
  state: ``Closed`` when the queue's PodGroup list is empty). It needs the whole cluster, so
  only an instance that sees it all (:meth:`Controllers.settle_closing`) does it;
- a bus ``Command`` that opens or closes a queue (what ``vcctl queue operate`` creates) is
  carried out, as Volcano's queue controller carries it out;
- a queue that changes under a ``Closing`` or ``Closed`` parent closes too, and one its parent
  closed opens with it (``syncHierarchicalQueue``);
- with ``--create-podgroups``, a pod of ours without ``scheduling.k8s.io/group-name`` gets a
  PodGroup ``podgroup-<owner or pod UID>`` (minMember from the owner's
  ``scheduling.volcano.sh/group-min-member``) and then the annotation naming it. (Without it,
  such pods are grouped in memory: no writes.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from caldera.cache.podgroups import implicit_podgroup_manifest, implicit_podgroup_name
from caldera.cache.queues import ROOT_QUEUE
from caldera.cache.state import ClusterState
from caldera.k8s.errors import API_ERRORS, Outcome, classify, describe
from caldera.k8s.live import LiveError
from caldera.k8s.queue_state import apply_queue_writes
from caldera.k8s.resources import COMMANDS, PODGROUPS, PODS, QUEUES
from caldera.k8s.rest import MERGE_PATCH, Rest
from caldera.models.core import FINISHED_PHASES, Pod
from caldera.models.parse import parse_object
from caldera.models.volcano import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, Queue
from caldera.operator.logs import about
from caldera.queue_operate import QueueWrite, command_target, follow_parent, plan

__all__ = ["Controllers", "occupied_queues"]

log = logging.getLogger(__name__)

SETTLE_DELAY = 0.2
"""How long news gather before the ``Closing`` queues are looked at again (a burst of pod
events is one look)."""


def occupied_queues(
    state: ClusterState, scheduler_names: Collection[str], default_queue: str
) -> set[str]:
    """The queues something is in: every queue a PodGroup names (any phase, as Volcano counts
    them), and the queue of every unfinished pod of ``scheduler_names`` that has no PodGroup
    annotation (its group lives only in the scheduler's memory)."""
    busy = {pg.spec.queue or default_queue for pg in state.podgroups.values()}
    for pod in state.pods.values():
        notes = pod.metadata.annotations
        if (
            pod.spec.scheduler_name in scheduler_names
            and pod.status.phase not in FINISHED_PHASES
            and GROUP_NAME_ANNOTATION not in notes
        ):
            busy.add(notes.get(QUEUE_NAME_ANNOTATION) or default_queue)
    return busy


class Controllers:
    def __init__(self, rest: Rest, default_queue: str) -> None:
        self._rest = rest
        self._default_queue = default_queue
        self._view: Callable[[], ClusterState | None] = lambda: None
        self._names: frozenset[str] = frozenset()
        self._closing: set[str] = set()
        """Queues whose last event said ``Closing``: while there are any, news look again."""
        self._settling: asyncio.Task[None] | None = None

    def settle_closing(
        self, view: Callable[[], ClusterState | None], scheduler_names: Collection[str]
    ) -> None:
        """Turn ``Closing`` queues ``Closed`` once :func:`occupied_queues` of ``view()`` (None
        until the cache holds every kind) leaves them out."""
        self._view = view
        self._names = frozenset(scheduler_names)

    def poke(self) -> None:
        """News from the cache (a PodGroup or a pod gone, say): look at the ``Closing`` queues
        soon, once for the whole burst. Nothing to do, and O(1), while none is closing."""
        if not self._closing or (self._settling is not None and not self._settling.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - the cache is fed in the event loop
            return
        self._settling = loop.create_task(self._settle_soon(), name="settle-closing")

    async def close(self) -> None:
        """Stop a look that is waiting or running (the operator is stopping)."""
        if self._settling is not None:
            self._settling.cancel()
            await asyncio.gather(self._settling, return_exceptions=True)

    async def _settle_soon(self) -> None:
        await asyncio.sleep(SETTLE_DELAY)
        await self.settle()

    async def settle(self) -> None:
        """Mark ``Closed`` the ``Closing`` queues nothing is in any more (the cache must say
        ``Closing`` too: a queue reopened meanwhile is left alone)."""
        state = self._view()
        if state is None or not self._closing:
            return
        busy = occupied_queues(state, self._names, self._default_queue)
        for name in sorted(self._closing - busy):
            cached = state.queues.get(name)
            if cached is None or cached.status.state != "Closing":
                continue  # the cache's news will poke again once it has caught up
            try:
                await self._set_state(name, "Closed")
                log.info("queue %s is Closed: nothing is left in it", name)
                self._closing.discard(name)
            except API_ERRORS as exc:
                self._queue_failed(name, "mark it Closed", exc)

    async def _set_state(self, name: str, state: str) -> None:
        await self._rest.call(
            "patch",
            QUEUES,
            name=name,
            subresource="status",
            body={"status": {"state": state}},
            content_type=MERGE_PATCH,
        )

    async def ensure_queue(self, name: str) -> None:
        """Create ``name`` (root or the default queue) unless it exists; retries until it can."""
        body = {
            "apiVersion": f"{QUEUES.group}/{QUEUES.version}",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": name != ROOT_QUEUE},
        }
        delay = 0.5
        while True:
            try:
                await self._rest.call("create", QUEUES, body=body)
                log.info("created queue %s", name)
                return
            except API_ERRORS as exc:
                if classify(exc) is Outcome.CONFLICT:
                    return
                log.warning("cannot create queue %s yet: %s", name, describe(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def ensure_builtin_queues(self) -> None:
        for name in dict.fromkeys((ROOT_QUEUE, self._default_queue)):
            await self.ensure_queue(name)

    async def on_queue(self, event: str | None, name: str, body: Mapping[str, Any]) -> None:
        if event == "DELETED":
            self._closing.discard(name)
            if name == ROOT_QUEUE:
                await self.ensure_queue(ROOT_QUEUE)
            return
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        if status.get("state") == "Closing":
            self._closing.add(name)
            self.poke()
        else:
            self._closing.discard(name)
        try:
            if not status.get("state"):
                await self._set_state(name, "Open")
            if name != ROOT_QUEUE and not spec.get("parent"):
                await self._rest.call(
                    "patch",
                    QUEUES,
                    name=name,
                    body={"spec": {"parent": ROOT_QUEUE}},
                    content_type=MERGE_PATCH,
                )
        except API_ERRORS as exc:
            self._queue_failed(name, "set defaults", exc)
        await self._follow_parent(body)

    async def _follow_parent(self, body: Mapping[str, Any]) -> None:
        """Close a queue that is open under a shut parent, or open one its parent's closing
        closed once the parent is open (Volcano's ``syncHierarchicalQueue``), by the parent's
        state in the cache (nothing before it holds every kind)."""
        state = self._view()
        queue = parse_object("Queue", body) if state is not None else None
        if state is None or not isinstance(queue, Queue):
            return
        writes = follow_parent(queue, state.queues)
        if writes:
            parent = queue.spec.parent or ROOT_QUEUE
            await self._apply(
                writes, f"as its parent {parent} is {state.queues[parent].status.state}"
            )

    async def _apply(self, writes: Sequence[QueueWrite], why: str) -> None:
        """Make ``writes`` (:mod:`caldera.queue_operate`), each logged saying ``why``; a
        failure is logged, and the rest left undone."""
        try:
            await apply_queue_writes(self._rest, writes)
        except LiveError as exc:
            log.warning("%s: %s", why, exc, extra=about("Queue", writes[0].name))
            return
        for write in writes:
            log.info(
                "queue %s: %s, %s", write.name, write.state, why, extra=about("Queue", write.name)
            )

    async def _queues(self) -> Mapping[str, Queue]:
        """The queues as the cache holds them; listed, on an instance whose cache does not hold
        the whole cluster (or not yet)."""
        state = self._view()
        if state is not None:
            return state.queues
        listed = await self._rest.call("list", QUEUES)
        parsed = (parse_object("Queue", item) for item in listed.get("items", []))
        return {q.metadata.name: q for q in parsed if isinstance(q, Queue)}

    def _queue_failed(self, name: str, doing: str, exc: BaseException) -> None:
        """A write to queue ``name`` failed: logged, unless the API server is away (the
        outage is said once, and the write comes again with the queue's next news)."""
        if not self._rest.reach.counted(exc):
            log.warning(
                "queue %s: cannot %s: %s", name, doing, describe(exc), extra=about("Queue", name)
            )

    async def on_command(
        self, event: str | None, namespace: str, name: str, body: Mapping[str, Any]
    ) -> None:
        """A bus Command naming a queue (``vcctl queue operate -a open|close``), taken as
        Volcano's queue controller takes it (``handleCommand``): deleted first, so that of the
        replicas (or a Volcano controller beside us) exactly one acts on it, then the queue
        opened or closed as ``caldera queue`` does (:mod:`caldera.queue_operate`)."""
        wanted = command_target(body) if event != "DELETED" else None
        if wanted is None:
            return
        queue, verb = wanted
        what = f"command {namespace}/{name} ({verb} queue {queue})"
        try:
            await self._rest.call("delete", COMMANDS, namespace=namespace, name=name)
        except API_ERRORS as exc:
            if classify(exc) is not Outcome.NOT_FOUND:  # else taken by another reader
                log.warning(
                    "%s: cannot take it: %s", what, describe(exc), extra=about("Queue", queue)
                )
            return
        try:
            queues = await self._queues()
        except API_ERRORS as exc:
            log.warning("%s: %s", what, describe(exc), extra=about("Queue", queue))
            return
        target = queues.get(queue)
        writes = f"queue {queue} does not exist" if target is None else plan(verb, target, queues)
        if isinstance(writes, str):
            log.warning("%s: %s", what, writes, extra=about("Queue", queue))
        else:
            await self._apply(writes, f"by {what}")

    async def create_podgroup(self, pod: Pod, min_member: int) -> bool:
        """Volcano's pg-controller duty: a PodGroup for a bare pod, then the annotation naming
        it; True when both are done (or already were)."""
        manifest = implicit_podgroup_manifest(pod, min_member=min_member)
        ns, name = pod.metadata.namespace, pod.metadata.name
        try:
            await self._rest.call("create", PODGROUPS, namespace=ns, body=manifest)
        except API_ERRORS as exc:
            if classify(exc) is not Outcome.CONFLICT:
                log.warning(
                    "pod %s/%s: cannot create its PodGroup: %s",
                    ns,
                    name,
                    describe(exc),
                    extra=about("Pod", name, ns),
                )
                return False
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: implicit_podgroup_name(pod)}}}
        try:
            await self._rest.call(
                "patch", PODS, namespace=ns, name=name, body=patch, content_type=MERGE_PATCH
            )
        except API_ERRORS as exc:
            if not self._rest.reach.counted(exc):
                log.warning(
                    "pod %s/%s: cannot annotate its PodGroup: %s",
                    ns,
                    name,
                    describe(exc),
                    extra=about("Pod", name, ns),
                )
            return classify(exc) is Outcome.NOT_FOUND
        return True
