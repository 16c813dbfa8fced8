"""The controller duties Volcano leaves to other components, done here because users run only us.

- ``root`` and the default queue exist (created at startup, ``root`` recreated if deleted);
- every queue has ``status.state`` (``Open`` when unset) and, except ``root``, ``spec.parent``
  (``root`` when unset);
- a pod of ours without ``scheduling.k8s.io/group-name`` gets a PodGroup
  ``podgroup-<owner or pod UID>`` (minMember from the owner's
  ``scheduling.volcano.sh/group-min-member``) and then the annotation naming it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from typing import Any

from kubernetes_asyncio import client

from caldera.cache.podgroups import implicit_podgroup_manifest, implicit_podgroup_name
from caldera.cache.queues import ROOT_QUEUE
from caldera.k8s.calls import send
from caldera.k8s.errors import API_ERRORS, Outcome, classify
from caldera.k8s.resources import MERGE_PATCH, SCHEDULING_GROUP, SCHEDULING_VERSION
from caldera.models.core import Pod
from caldera.models.parse import parse_object
from caldera.models.volcano import GROUP_MIN_MEMBER_ANNOTATION, GROUP_NAME_ANNOTATION
from caldera.operator.logs import about

__all__ = ["Controllers"]

log = logging.getLogger(__name__)
GROUP, VERSION = SCHEDULING_GROUP, SCHEDULING_VERSION
_OWNER_READERS = {
    ("apps/v1", "ReplicaSet"): ("AppsV1Api", "read_namespaced_replica_set"),
    ("apps/v1", "StatefulSet"): ("AppsV1Api", "read_namespaced_stateful_set"),
    ("apps/v1", "Deployment"): ("AppsV1Api", "read_namespaced_deployment"),
    ("batch/v1", "Job"): ("BatchV1Api", "read_namespaced_job"),
}


class Controllers:
    def __init__(
        self, api: client.ApiClient, scheduler_names: Collection[str], default_queue: str
    ) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._names = frozenset(scheduler_names)
        self._default_queue = default_queue

    async def ensure_queue(self, name: str) -> None:
        """Create ``name`` (root or the default queue) unless it exists; retries until it can."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": name != ROOT_QUEUE},
        }
        delay = 0.5
        while True:
            try:
                await self._custom.create_cluster_custom_object(GROUP, VERSION, "queues", body)
                log.info("created queue %s", name)
                return
            except API_ERRORS as exc:
                if classify(exc) is Outcome.CONFLICT:
                    return
                log.warning("cannot create queue %s yet: %s", name, exc)
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
                await self._custom.patch_cluster_custom_object_status(
                    GROUP,
                    VERSION,
                    "queues",
                    name,
                    {"status": {"state": "Open"}},
                    _content_type=MERGE_PATCH,
                )
            if name != ROOT_QUEUE and not spec.get("parent"):
                await self._custom.patch_cluster_custom_object(
                    GROUP,
                    VERSION,
                    "queues",
                    name,
                    {"spec": {"parent": ROOT_QUEUE}},
                    _content_type=MERGE_PATCH,
                )
        except API_ERRORS as exc:
            log.warning("queue %s: cannot set defaults: %s", name, exc, extra=about("Queue", name))

    def needs_podgroup(self, body: Mapping[str, Any]) -> bool:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return (
            spec.get("schedulerName") in self._names
            and not spec.get("nodeName")
            and not meta.get("deletionTimestamp")
            and GROUP_NAME_ANNOTATION not in (meta.get("annotations") or {})
        )

    async def on_pod(self, body: Mapping[str, Any]) -> None:
        """Give a bare pod of ours its PodGroup and annotation (idempotent)."""
        if not self.needs_podgroup(body):
            return
        pod = parse_object("Pod", body)
        if not isinstance(pod, Pod):
            return  # reported by the cache
        manifest = implicit_podgroup_manifest(pod, min_member=await self._min_member(pod))
        ns = pod.metadata.namespace
        try:
            await send(
                self._custom.create_namespaced_custom_object,
                GROUP,
                VERSION,
                ns,
                "podgroups",
                manifest,
            )
        except API_ERRORS as exc:
            if classify(exc) is not Outcome.CONFLICT:
                log.warning("pod %s/%s: cannot create its PodGroup: %s", ns, pod.metadata.name, exc)
                return
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: implicit_podgroup_name(pod)}}}
        try:
            await send(self._core.patch_namespaced_pod, pod.metadata.name, ns, patch)
        except API_ERRORS as exc:
            log.warning(
                "pod %s/%s: cannot annotate its PodGroup: %s",
                ns,
                pod.metadata.name,
                exc,
                extra=about("Pod", pod.metadata.name, ns),
            )

    async def _min_member(self, pod: Pod) -> int:
        owner = next((o for o in pod.metadata.owner_references if o.controller), None)
        reader = _OWNER_READERS.get((owner.api_version, owner.kind)) if owner else None
        if owner is None or reader is None:
            return 1
        api_cls, method = reader
        try:
            obj = await getattr(getattr(client, api_cls)(self._api), method)(
                owner.name, pod.metadata.namespace
            )
        except API_ERRORS:
            return 1
        raw = (obj.metadata.annotations or {}).get(GROUP_MIN_MEMBER_ANNOTATION, "")
        try:
            return max(int(raw), 1) if raw else 1
        except ValueError:
            return 1
