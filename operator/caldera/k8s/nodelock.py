"""HAMi's node lock: one node annotation naming the pod whose devices are being handed out.

The value is ``<RFC3339 time>,<namespace>,<pod>`` (older writers: the time alone). HAMi's device
plugin reads it to find the pod the kubelet is allocating for, and clears it when it is done. A
lock is taken over when it is older than the timeout, when the pod it names no longer exists, or
when it already names this pod; otherwise the node "has been locked". Taking and releasing are
merge patches guarded by the node's resource version, so two schedulers never both win.

Cambricon's lock (``cambricon.com/dsmlu.lock``) is *bare*: the time alone, as its
``setNodeLock`` writes it. Such a lock names no pod: one with an unreadable time is refused (its
``LockNode`` fails on ``time.Parse``), and releasing clears it as it is (``ReleaseNodeLock``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from caldera.k8s.errors import API_ERRORS, Outcome, classify
from caldera.k8s.rest import MERGE_PATCH, Resource, Rest

__all__ = ["NodeLocks", "lock_value", "parse_lock"]

NODES = Resource("", "v1", "nodes")
PODS = Resource("", "v1", "pods")


def lock_value(namespace: str, name: str, now: datetime, bare: bool = False) -> str:
    """HAMi's ``time,namespace,pod``; ``bare``: the time alone (Cambricon's ``setNodeLock``)."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return stamp if bare else f"{stamp},{namespace},{name}"


def parse_lock(value: str) -> tuple[datetime | None, str, str]:
    """(when, namespace, pod) of a lock value; an unreadable time is None (counts as stale)."""
    when, _, rest = value.partition(",")
    namespace, _, name = rest.partition(",")
    try:
        stamp: datetime | None = datetime.fromisoformat(when.strip())
    except ValueError:
        stamp = None
    return stamp, namespace, name


class NodeLocks:
    def __init__(self, rest: Rest, timeout: float = 10.0) -> None:
        self._rest = rest
        self._timeout = timeout

    async def acquire(
        self, node: str, key: str, namespace: str, pod: str, expiry: float, bare: bool = False
    ) -> str | None:
        """Take the lock for ``namespace/pod``; None, or why not (HAMi's words when held)."""
        current = await self._get(NODES, None, node)
        meta = current.get("metadata") or {}
        held = (meta.get("annotations") or {}).get(key)
        now = datetime.now(UTC)
        if held:
            when, owner_ns, owner = parse_lock(held)
            if bare and when is None:  # Cambricon's LockNode: time.Parse fails, no lock
                return f"node {node} holds an unreadable lock {key}={held!r}"
            mine = (owner_ns, owner) == (namespace, pod)
            fresh = when is not None and (now - when).total_seconds() < expiry
            if not mine and fresh and (not owner or await self._exists(owner_ns, owner)):
                return f"node {node} has been locked within {expiry:.0f} seconds"
        await self._patch(
            node, meta.get("resourceVersion", ""), key, lock_value(namespace, pod, now, bare)
        )
        return None

    async def release(
        self, node: str, key: str, namespace: str, pod: str, bare: bool = False
    ) -> None:
        """Clear the lock if it still names ``namespace/pod`` (someone else's is left alone); a
        ``bare`` lock names no pod and is cleared as it is (Cambricon's ``ReleaseNodeLock``)."""
        current = await self._get(NODES, None, node)
        meta = current.get("metadata") or {}
        held = (meta.get("annotations") or {}).get(key)
        if not held or (not bare and parse_lock(held)[1:] != (namespace, pod)):
            return
        await self._patch(node, meta.get("resourceVersion", ""), key, None)

    async def _exists(self, namespace: str, name: str) -> bool:
        try:
            await self._get(PODS, namespace, name)
        except API_ERRORS as exc:
            if classify(exc) is Outcome.NOT_FOUND:
                return False
            raise
        return True

    async def _get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._rest.call(
            "get", resource, namespace=namespace, name=name, timeout=self._timeout
        )
        return out

    async def _patch(self, node: str, version: str, key: str, value: str | None) -> None:
        meta: dict[str, Any] = {"annotations": {key: value}}
        if version:
            meta["resourceVersion"] = version
        await self._rest.call(
            "patch",
            NODES,
            name=node,
            body={"metadata": meta},
            content_type=MERGE_PATCH,
            timeout=self._timeout,
        )
