"""The controller duties Volcano leaves to other components, done here because users run only us.

- ``root`` and the default queue exist (created at startup, ``root`` recreated if deleted);
- every queue has ``status.state`` (``Open`` when unset) and, except ``root``, ``spec.parent``
  (``root`` when unset);
- with ``--create-podgroups``, a pod of ours without ``scheduling.k8s.io/group-name`` gets a
  PodGroup ``podgroup-<owner or pod UID>`` (minMember from the owner's
  ``scheduling.volcano.sh/group-min-member``) and then the annotation naming it. (Without it,
  such pods are grouped in memory: no writes.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from caldera.cache.podgroups import implicit_podgroup_manifest, implicit_podgroup_name
from caldera.cache.queues import ROOT_QUEUE
from caldera.k8s.errors import API_ERRORS, Outcome, classify, describe
from caldera.k8s.resources import PODGROUPS, PODS, QUEUES
from caldera.k8s.rest import MERGE_PATCH, Rest
from caldera.models.core import Pod
from caldera.models.volcano import GROUP_NAME_ANNOTATION
from caldera.operator.logs import about

__all__ = ["Controllers"]

log = logging.getLogger(__name__)


class Controllers:
    def __init__(self, rest: Rest, default_queue: str) -> None:
        self._rest = rest
        self._default_queue = default_queue

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
            if name == ROOT_QUEUE:
                await self.ensure_queue(ROOT_QUEUE)
            return
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        try:
            if not status.get("state"):
                await self._rest.call(
                    "patch",
                    QUEUES,
                    name=name,
                    subresource="status",
                    body={"status": {"state": "Open"}},
                    content_type=MERGE_PATCH,
                )
            if name != ROOT_QUEUE and not spec.get("parent"):
                await self._rest.call(
                    "patch",
                    QUEUES,
                    name=name,
                    body={"spec": {"parent": ROOT_QUEUE}},
                    content_type=MERGE_PATCH,
                )
        except API_ERRORS as exc:
            if not self._rest.reach.counted(exc):
                log.warning(
                    "queue %s: cannot set defaults: %s",
                    name,
                    describe(exc),
                    extra=about("Queue", name),
                )

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
