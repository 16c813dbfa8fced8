"""Running the real operator against the ``k8s`` fixture, and cluster objects as API dicts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from caldera.framework.registry import Registry
from caldera.operator.app import Runtime, operate
from caldera.operator.settings import Settings
from emulator.handles import K8sHandle

VOLCANO = "scheduling.volcano.sh"


@contextlib.asynccontextmanager
async def running_operator(k8s: K8sHandle, **overrides: Any) -> AsyncIterator[Runtime]:
    """Run ``caldera run`` in this event loop until the block ends, with ``Settings`` fields
    ``overrides``; ``environ=`` is the environment it reads (Volcano's multi-scheduler
    variables; default: none of them); ``registry=`` the plugins it has (default: the installed
    entry points)."""
    environ: dict[str, str] = overrides.pop("environ", None) or {}
    registry: Registry | None = overrides.pop("registry", None)
    options: dict[str, Any] = {
        "kubeconfig": str(k8s.kubeconfig_path),
        "schedule_period": 0.2,
        "leader_elect": False,
        "listen_address": "",
        "healthz_address": "",
        "policy_check_interval": 0.2,
    }
    options.update(overrides)
    runtime = Runtime.create(Settings(**options), registry, environ=environ)
    task = asyncio.create_task(operate(runtime))
    try:
        started = asyncio.create_task(runtime.started.wait())
        await asyncio.wait({started, task}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        if not runtime.started.is_set():
            started.cancel()
            raise AssertionError("the operator did not start")
        yield runtime
    finally:
        runtime.stop.set()
        await asyncio.wait_for(task, timeout=20)


def shard_instance(name: str, mode: str) -> dict[str, Any]:
    """The options of a scheduler that follows its NodeShard (``--scheduler-sharding-mode``):
    its scheduler name, NodeShard and lease all ``name``."""
    return {
        "scheduler_names": [name],
        "scheduler_sharding_mode": mode,
        "scheduler_sharding_name": name,
        "lock_name": name,
    }


def node(name: str, cpu: str = "4", memory: str = "8Gi", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    cpu: str = "1",
    namespace: str = "default",
    scheduler: str = "volcano",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": ann},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ],
        },
    }


def podgroup(
    name: str, min_member: int, *, queue: str = "default", namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": queue},
    }


def queue(name: str, weight: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


async def wait_bound(
    k8s: K8sHandle, *names: str, namespace: str | None = None, timeout: float = 20.0
) -> dict[str, str]:
    """Wait until every named pod (in ``k8s.namespace`` unless told) has a node; returns
    pod → node."""
    out = {}
    for name in names:
        obj = await k8s.wait_for(
            "pods",
            name,
            lambda p: bool((p.get("spec") or {}).get("nodeName")),
            namespace=namespace or k8s.namespace,
            timeout=timeout,
        )
        out[name] = obj["spec"]["nodeName"]
    return out


async def wait_event(
    k8s: K8sHandle, reason: str, about: dict[str, Any], *, timeout: float = 10.0
) -> dict[str, Any]:
    """The first Event with ``reason`` about the object ``about`` (as created or read): matched
    by its uid, not its name, so an Event about an older namesake (an earlier test or run on a
    real cluster) does not count."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                events = await k8s.events_about(about, reason)
                if events:
                    return events[0]
                await asyncio.sleep(0.1)
    except TimeoutError:
        meta = about["metadata"]
        raise AssertionError(
            f"no {reason} event about {meta.get('namespace', '')}/{meta['name']} "
            f"(uid {meta['uid']}) within {timeout}s"
        ) from None
