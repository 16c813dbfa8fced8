"""Several Caldera instances on one API server, end to end: Volcano's multi-scheduler
StatefulSet (``MULTI_SCHEDULER_ENABLE``, ``SCHEDULER_NUM``, ``SCHEDULER_POD_NAME``) with two and
three instances, and two instances each with its own ``--node-selector``. Every pod is bound
exactly once (one ``binding`` each in the request log), by the instance the hash gives it, on a
node that instance owns."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

import pytest

from caldera.sharding.ring import statefulset_members
from caldera.sharding.scope import Scope
from emulator.handles import K8sHandle
from integration.harness import node, pod, queue, running_operator, shard_instance, wait_bound


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


async def test_peers_with_node_selectors_hold_a_queues_capability_across_instances(
    k8s: K8sHandle,
) -> None:
    """``--peer-scheduler-name``: the serving instance counts the training instance's running
    pods, so the queue's 3 cpus hold for both: of its two pods one is bound. Its name sorts
    first, so it writes the queue's status, with the whole use."""
    k8s.needs_emulator("it counts the bindings in the request log")
    for name, role in (("t1", "train"), ("s1", "serving")):
        await k8s.create("nodes", node(name, cpu="8", role=role))
    shared = queue("shared")
    shared["spec"]["capability"] = {"cpu": "3"}
    await k8s.create("queues", shared)
    in_q = {"scheduling.volcano.sh/queue-name": "shared"}
    train = [f"train-{i}" for i in range(2)]
    serve = [f"serve-{i}" for i in range(2)]
    instances: list[dict[str, Any]] = [
        {"scheduler_names": [me], "node_selector": [f"role:{role}"], "lock_name": me,
         "peer_scheduler_names": [peer]}
        for me, role, peer in (("train", "train", "serve"), ("serve", "serving", "train"))
    ]  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        for options in instances:
            await stack.enter_async_context(running_operator(k8s, **options))
        for name in train:
            await k8s.create(
                "pods", pod(name, scheduler="train", annotations=in_q), namespace=k8s.namespace
            )
        assert set((await wait_bound(k8s, *train)).values()) == {"t1"}
        for name in serve:
            await k8s.create(
                "pods", pod(name, scheduler="serve", annotations=in_q), namespace=k8s.namespace
            )
        bound = await placed_of(k8s, serve, 1)
        assert list(bound.values()) == ["s1"]
        await k8s.wait_for(
            "queues",
            "shared",
            lambda o: (o.get("status") or {}).get("allocated", {}).get("cpu") == "3",
        )
    assert set(bindings(k8s).values()) == {1}


def node_shard(name: str, desired: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "shard.volcano.sh/v1alpha1",
        "kind": "NodeShard",
        "metadata": {"name": name},
        "spec": {"nodesDesired": desired},
    }


async def in_use(k8s: K8sHandle, name: str, want: list[str]) -> None:
    await k8s.wait_for(
        "nodeshards",
        name,
        lambda s: sorted((s.get("status") or {}).get("nodesInUse") or []) == want,
        timeout=20,
    )


async def placed_of(k8s: K8sHandle, names: list[str], count: int) -> dict[str, str]:
    """The nodes of ``names`` once ``count`` of them are bound, read again a moment later (a
    further bind would show)."""

    async def bound() -> dict[str, str]:
        pods = [await k8s.get("pods", n, namespace=k8s.namespace) for n in names]
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")
        }

    for _ in range(200):
        if len(await bound()) >= count:
            await asyncio.sleep(1.0)  # several sessions
            return await bound()
        await asyncio.sleep(0.1)
    raise AssertionError(f"fewer than {count} of {names} were bound")


async def test_a_nodeshard_change_moves_a_node_between_running_schedulers(k8s: K8sHandle) -> None:
    """Hard sharding, two schedulers: each places only on its NodeShard's nodes and says so in
    its status; when the controller gives n3 to alpha, beta lets it go first and alpha then
    places there, with no restart."""
    k8s.needs_emulator("it serves the NodeShard CRD")
    for name in ("n1", "n2", "n3", "n4"):
        await k8s.create("nodes", node(name, cpu="2", memory="8Gi"))
    await k8s.create("nodeshards", node_shard("alpha", ["n1", "n2"]))
    await k8s.create("nodeshards", node_shard("beta", ["n3", "n4"]))
    first = [pod(f"a{i}", scheduler="alpha", cpu="2") for i in range(3)]
    for obj in first:
        await k8s.create("pods", obj, namespace=k8s.namespace)
    await k8s.create("pods", pod("b0", scheduler="beta", cpu="1"), namespace=k8s.namespace)
    shards = [shard_instance(n, "hard") for n in ("alpha", "beta")]
    async with contextlib.AsyncExitStack() as stack:
        for options in shards:
            await stack.enter_async_context(running_operator(k8s, **options))
        (b0,) = (await wait_bound(k8s, "b0")).values()
        assert b0 in {"n3", "n4"}
        await in_use(k8s, "alpha", ["n1", "n2"])
        await in_use(k8s, "beta", ["n3", "n4"])
        alpha = await placed_of(k8s, ["a0", "a1", "a2"], count=2)
        assert sorted(alpha.values()) == ["n1", "n2"]  # n3 and n4 have room, but are beta's
        (waiting,) = {"a0", "a1", "a2"} - alpha.keys()
        moved = "n4" if b0 == "n3" else "n3"  # the node beta holds no pod on
        await k8s.patch("nodeshards", "alpha", {"spec": {"nodesDesired": ["n1", "n2", moved]}})
        await k8s.patch("nodeshards", "beta", {"spec": {"nodesDesired": [b0]}})
        await in_use(k8s, "beta", [b0])
        await in_use(k8s, "alpha", sorted(["n1", "n2", moved]))
        assert (await wait_bound(k8s, waiting)) == {waiting: moved}
    assert set(bindings(k8s).values()) == {1}


@pytest.mark.parametrize("count", [2, 3])
async def test_soft_sharding_fills_its_shard_first_then_borrows(k8s: K8sHandle, count: int) -> None:
    """Soft sharding, ``count`` schedulers of one node each plus an unassigned node: alpha's
    three pods fill alpha's node (two fit) and the third goes elsewhere, the bind checked with
    the API server first (a list of that node's pods); the others keep to their own nodes."""
    k8s.needs_emulator("it counts the bindings in the request log")
    names = ["alpha", "beta", "gamma"][:count]
    for i in range(count + 1):
        await k8s.create("nodes", node(f"n{i}", cpu="4", memory="8Gi"))
    for i, name in enumerate(names):
        await k8s.create("nodeshards", node_shard(name, [f"n{i}"]))
    alpha = [f"a{i}" for i in range(3)]
    for pod_name in alpha:
        await k8s.create("pods", pod(pod_name, scheduler="alpha", cpu="2"), namespace=k8s.namespace)
    others = {f"{n[0]}x": n for n in names[1:]}
    for pod_name, scheduler in others.items():
        await k8s.create(
            "pods", pod(pod_name, scheduler=scheduler, cpu="1"), namespace=k8s.namespace
        )
    options = [shard_instance(n, "soft") for n in names]
    async with contextlib.AsyncExitStack() as stack:
        for opts in options:
            await stack.enter_async_context(running_operator(k8s, **opts))
        bound = await wait_bound(k8s, *alpha, *others)
    assert sorted(bound[a] for a in alpha).count("n0") == 2
    (borrowed,) = {bound[a] for a in alpha} - {"n0"}
    for pod_name, scheduler in others.items():
        assert bound[pod_name] == f"n{names.index(scheduler)}"
    checked = {
        r.query["fieldSelector"]
        for r in k8s.requests
        if r.resource == "pods"
        and r.verb == "list"
        and "spec.nodeName=" in r.query.get("fieldSelector", "")
    }
    assert checked == {f"spec.nodeName={borrowed}"}
    assert set(bindings(k8s).values()) == {1}
