"""Bare pods of ours (no ``scheduling.k8s.io/group-name``): what their group needs from the API.

A bare pod owned by a ReplicaSet, StatefulSet, Deployment or Job belongs to one group with the
controller's other pods, sized by the controller's ``scheduling.volcano.sh/group-min-member``
annotation. That annotation is read once per controller (one GET, remembered by controller UID)
and put in the cache, where the session finds it; a pod whose controller has not been read yet
waits for it. A controller that cannot be read counts as ``1``, as Volcano's pg-controller does.

With ``--create-podgroups`` each bare pod also gets a real PodGroup and the annotation naming it
(Volcano's pg-controller duty), once per pod.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from caldera.k8s.errors import API_ERRORS
from caldera.k8s.resources import OWNERS
from caldera.k8s.rest import Rest
from caldera.models.base import OwnerReference
from caldera.models.core import Pod
from caldera.models.volcano import GROUP_MIN_MEMBER_ANNOTATION, GROUP_NAME_ANNOTATION
from caldera.operator.watch.cache import Cache
from caldera.operator.writers.controllers import Controllers

__all__ = ["BarePods"]

log = logging.getLogger(__name__)
_READ_ERRORS: tuple[type[BaseException], ...] = (*API_ERRORS, ValueError)
"""A failed read, or a reply that is not what it should be."""


class BarePods:
    def __init__(
        self, rest: Rest, cache: Cache, controllers: Controllers, *, create_podgroups: bool
    ) -> None:
        self._rest = rest
        self._cache = cache
        self._controllers = controllers
        self._create = create_podgroups
        self._owners: dict[str, asyncio.Task[int]] = {}
        self._grouping: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def seen(self, pod: Pod) -> None:
        """A pending pod of ours changed (called by the cache for every such event)."""
        meta = pod.metadata
        if GROUP_NAME_ANNOTATION in meta.annotations:
            self._grouping.discard(meta.uid)
            return
        owner = next((o for o in meta.owner_references if o.controller and o.uid), None)
        if owner is not None and (owner.api_version, owner.kind) not in OWNERS:
            owner = None  # not a controller whose annotation sizes the group
        if owner is not None and owner.uid not in self._owners:
            self._owners[owner.uid] = self._spawn(self._read_owner(owner, meta.namespace))
        if self._create and meta.uid and meta.uid not in self._grouping:
            self._grouping.add(meta.uid)
            self._spawn(self._group(pod, self._owners[owner.uid] if owner else None))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _read_owner(self, owner: OwnerReference, namespace: str) -> int:
        resource = OWNERS[(owner.api_version, owner.kind)]
        value = 1
        try:
            obj = await self._rest.call("get", resource, namespace=namespace, name=owner.name)
            raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(
                GROUP_MIN_MEMBER_ANNOTATION, ""
            )
            value = max(int(raw), 1) if raw else 1
        except _READ_ERRORS as exc:
            log.info(
                "%s %s/%s: group-min-member taken as 1 (%s)",
                owner.kind,
                namespace,
                owner.name,
                exc,
            )
        self._cache.set_owner_min_member(owner.uid, value)
        return value

    async def _group(self, pod: Pod, owner: asyncio.Task[int] | None) -> None:
        min_member = await owner if owner is not None else 1
        if not await self._controllers.create_podgroup(pod, min_member):
            self._grouping.discard(pod.metadata.uid)  # the next event about it tries again

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
