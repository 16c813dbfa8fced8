"""The operator end to end: real kopf and kubernetes-asyncio clients against the API emulator."""

from __future__ import annotations

import asyncio

from emulator.handles import K8sHandle
from integration.harness import node, pod, podgroup, running_operator, wait_bound


async def test_a_gang_is_bound_and_its_podgroup_and_queue_status_written(k8s: K8sHandle) -> None:
    await k8s.create("nodes", node("n1"))
    await k8s.create("nodes", node("n2"))
    await k8s.create("podgroups", podgroup("train", 3), namespace="default")
    for i in range(3):
        await k8s.create("pods", pod(f"train-{i}", group="train"), namespace="default")
    async with running_operator(k8s):
        placed = await wait_bound(k8s, "train-0", "train-1", "train-2")
        assert set(placed.values()) <= {"n1", "n2"}
        pg = await k8s.wait_for(
            "podgroups",
            "train",
            lambda o: (
                (o.get("status") or {}).get("phase") == "Inqueue"
                or (o.get("status") or {}).get("phase") == "Running"
            ),
            namespace="default",
        )
        assert any(c["type"] == "Scheduled" for c in pg["status"]["conditions"])
        q = await k8s.wait_for(
            "queues",
            "default",
            lambda o: (o.get("status") or {}).get("allocated", {}).get("cpu") == "3",
        )
        assert q["status"]["state"] == "Open"
        await asyncio.sleep(0)


async def _pods_with_successful_bindings(k8s: K8sHandle) -> list[str]:
    return [
        r.name
        for r in k8s.find_requests(verb="create", resource="pods", subresource="binding")
        if r.status is not None and 200 <= r.status < 300
    ]


async def test_a_gang_that_cannot_fit_binds_nothing_and_says_why(k8s: K8sHandle) -> None:
    await k8s.create("nodes", node("n1", cpu="2"))
    await k8s.create("podgroups", podgroup("big", 3), namespace="default")
    for i in range(3):
        await k8s.create("pods", pod(f"big-{i}", group="big"), namespace="default")
    async with running_operator(k8s):
        pg = await k8s.wait_for(
            "podgroups",
            "big",
            lambda o: any(
                c.get("type") == "Unschedulable"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
            namespace="default",
        )
        cond = next(c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable")
        assert cond["reason"] == "NotEnoughResources"
        assert cond["message"].startswith(
            "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"
        )
        for name, reason in (("big-0", "Schedulable"), ("big-2", "Unschedulable")):
            p = await k8s.wait_for(
                "pods",
                name,
                lambda o: any(
                    c.get("type") == "PodScheduled"
                    for c in (o.get("status") or {}).get("conditions") or []
                ),
                namespace="default",
            )
            sched = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
            assert (sched["status"], sched["reason"]) == ("False", reason)
        await asyncio.sleep(1.0)  # several sessions
    assert await _pods_with_successful_bindings(k8s) == []
    assert not any((p.get("spec") or {}).get("nodeName") for p in await k8s.list("pods"))
    warnings = [
        e
        for e in await k8s.list("events")
        if e.get("reason") == "Unschedulable"
        and (e.get("involvedObject") or {}).get("name") == "big"
    ]
    assert len(warnings) == 1  # an event when the news is new, not one per session


async def test_bare_pods_get_a_podgroup_and_are_bound(k8s: K8sHandle) -> None:
    await k8s.create("nodes", node("n1"))
    created = await k8s.create("pods", pod("lonely"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "lonely")
    uid = created["metadata"]["uid"]
    pg = await k8s.get("podgroups", f"podgroup-{uid}", namespace="default")
    assert pg["spec"]["minMember"] == 1
    obj = await k8s.get("pods", "lonely", namespace="default")
    assert obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"podgroup-{uid}"


async def test_bind_failures_are_retried_until_each_pod_is_bound_exactly_once(
    k8s: K8sHandle,
) -> None:
    await k8s.create("nodes", node("n1", cpu="8"))
    names = [f"w-{i}" for i in range(6)]
    for name in names:
        await k8s.create("pods", pod(name), namespace="default")
    k8s.fail_next(500, verb="create", resource="pods", subresource="binding", name="w-0", times=2)
    k8s.fail_next(409, verb="create", resource="pods", subresource="binding", name="w-1")
    k8s.drop_next(verb="create", resource="pods", subresource="binding", name="w-2")
    k8s.drop_next(
        verb="create", resource="pods", subresource="binding", name="w-3", apply=True
    )  # the bind happens; only the answer is lost
    k8s.hang_next(
        verb="create", resource="pods", subresource="binding", name="w-4", seconds=2.0, apply=True
    )
    async with running_operator(k8s, bind_timeout=0.5):
        await wait_bound(k8s, *names, timeout=30)
        await asyncio.sleep(1.0)
    bound = await _pods_with_successful_bindings(k8s)
    # every pod bound exactly once (w-3 and w-4 were bound by their lost requests)
    assert sorted(bound) == sorted(n for n in names if n not in ("w-3", "w-4"))
    committed = {
        r.name
        for r in k8s.find_requests(verb="create", resource="pods", subresource="binding")
        if r.fault
    }
    assert {"w-0", "w-1", "w-2", "w-3", "w-4"} <= committed
    errors = [e for e in await k8s.list("events") if e.get("reason") == "FailedScheduling"]
    assert any("failed to bind to node n1" in e["message"] for e in errors)


async def test_scheduling_survives_watch_restarts_and_expired_history(k8s: K8sHandle) -> None:
    await k8s.create("nodes", node("n1", cpu="8"))
    await k8s.create("pods", pod("before"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "before")
        k8s.close_watches(abort=True)
        k8s.compact()
        await k8s.create("pods", pod("after"), namespace="default")
        await wait_bound(k8s, "after", timeout=30)


async def test_a_restarted_operator_rebuilds_its_state_and_binds_nothing_twice(
    k8s: K8sHandle,
) -> None:
    await k8s.create("nodes", node("n1", cpu="4"))
    for i in range(3):
        await k8s.create("pods", pod(f"first-{i}"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "first-0", "first-1", "first-2")
    for i in range(2):
        await k8s.create("pods", pod(f"second-{i}"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "second-0")
        pending = await k8s.wait_for(
            "pods",
            "second-1",
            lambda o: any(
                c.get("type") == "PodScheduled"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
            namespace="default",
        )
        assert not pending["spec"].get("nodeName")
        await asyncio.sleep(1.0)
    bound = await _pods_with_successful_bindings(k8s)
    # each pod bound once, and the restarted scheduler counted the pods already on n1: the fifth
    # one-cpu pod does not fit the four-cpu node
    assert sorted(bound) == ["first-0", "first-1", "first-2", "second-0"]
