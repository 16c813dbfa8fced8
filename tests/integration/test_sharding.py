"""Several Caldera instances on one API server, end to end: Volcano's multi-scheduler
StatefulSet (``MULTI_SCHEDULER_ENABLE``, ``SCHEDULER_NUM``, ``SCHEDULER_POD_NAME``) with two and
three instances, and two instances each with its own ``--node-selector``. Every pod is bound
exactly once (one ``binding`` each in the request log), by the instance the hash gives it, on a
node that instance owns."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest

from caldera.sharding.ring import statefulset_members
from caldera.sharding.scope import Scope
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound


def hash_env(me: str, count: int) -> dict[str, str]:
    return {"MULTI_SCHEDULER_ENABLE": "true", "SCHEDULER_NUM": str(count), "SCHEDULER_POD_NAME": me}


def bindings(k8s: K8sHandle) -> Counter[str]:
    return Counter(r.name for r in k8s.requests if r.subresource == "binding")


@pytest.mark.parametrize("count", [2, 3])
async def test_a_hash_split_binds_every_pod_once_on_its_own_instances_nodes(
    k8s: K8sHandle, count: int
) -> None:
    k8s.needs_emulator("it counts the bindings in the request log")
    members = statefulset_members("caldera-0", count)
    scopes = {me: Scope(frozenset(), me, tuple(members)) for me in members}
    nodes = [f"node-{i}" for i in range(4 * count)]
    for name in nodes:
        await k8s.create("nodes", node(name, cpu="8"))
    # every instance must own a node, or its pods have nowhere to go
    assert all(any(s.node(n, {}) for n in nodes) for s in scopes.values())
    names = [f"job-{i}" for i in range(6 * count)]
    for name in names:
        await k8s.create("pods", pod(name), namespace=k8s.namespace)
    async with contextlib.AsyncExitStack() as stack:
        for me in members:
            await stack.enter_async_context(running_operator(k8s, environ=hash_env(me, count)))
        bound = await wait_bound(k8s, *names)
    assert bindings(k8s) == dict.fromkeys(names, 1)
    for name, where in bound.items():
        (owner,) = [me for me, s in scopes.items() if s.owns(name, [])]
        assert scopes[owner].node(where, {}), (name, where, owner)


async def test_instances_with_node_selectors_keep_to_their_nodes(k8s: K8sHandle) -> None:
    """Volcano's first way: one scheduler name and one node label per instance."""
    k8s.needs_emulator("it counts the bindings in the request log")
    for name, role in (("t1", "train"), ("t2", "train"), ("s1", "serving")):
        await k8s.create("nodes", node(name, cpu="8", role=role))
    train = [pod(f"train-{i}", scheduler="train") for i in range(4)]
    serve = [pod(f"serve-{i}", scheduler="serve") for i in range(3)]
    for obj in (*train, *serve):
        await k8s.create("pods", obj, namespace=k8s.namespace)
    instances: list[dict[str, Any]] = [
        {"scheduler_names": ["train"], "node_selector": ["role:train"], "lock_name": "train"},
        {"scheduler_names": ["serve"], "node_selector": ["role:serving"], "lock_name": "serve"},
    ]
    async with contextlib.AsyncExitStack() as stack:
        for options in instances:
            await stack.enter_async_context(running_operator(k8s, **options))
        bound = await wait_bound(k8s, *(p["metadata"]["name"] for p in (*train, *serve)))
    assert {bound[p["metadata"]["name"]] for p in train} <= {"t1", "t2"}
    assert {bound[p["metadata"]["name"]] for p in serve} == {"s1"}
    assert set(bindings(k8s).values()) == {1}
