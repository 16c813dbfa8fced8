"""Kubernetes' own gang API (``scheduling.k8s.io`` PodGroups, v1alpha2 in 1.36, v1alpha3 in 1.37),
scheduled like Volcano's PodGroups: ``gang.minCount`` is minMember, ``basic`` is no gang; status
conditions written as kube-scheduler's ``submitPodGroupAlgorithmResult`` and
``updatePodGroupCondition`` write them, once per change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from emulator.discovery import WORKLOAD_PODGROUPS
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound
from integration.test_live_cli import cli
from integration.test_preemption import policy as preempt_policy

UPSTREAM = "podgroups.scheduling.k8s.io"
CONDITION = {"v1alpha2": "PodGroupScheduled", "v1alpha3": "PodGroupInitiallyScheduled"}


def workload_group(name: str, ns: str, version: str, min_count: int | None) -> dict[str, Any]:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulingPolicy": policy},
    }


def member(name: str, ns: str, group: str, cpu: str = "1") -> dict[str, Any]:
    obj = pod(name, namespace=ns, cpu=cpu)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def serve(k8s: K8sHandle, version: str) -> None:
    k8s.needs_emulator("serves the scheduling.k8s.io PodGroup version under test")
    k8s.emulator.registry.register(WORKLOAD_PODGROUPS[version])


async def _condition(k8s: K8sHandle, ns: str, name: str, kind: str, status: str) -> dict[str, Any]:
    pg = await k8s.wait_for(
        UPSTREAM,
        name,
        lambda o: any(
            c.get("type") == kind and c.get("status") == status
            for c in (o.get("status") or {}).get("conditions") or []
        ),
        namespace=ns,
    )
    return next(c for c in pg["status"]["conditions"] if c["type"] == kind)


def _status_writes(k8s: K8sHandle, name: str) -> int:
    return sum(
        1
        for r in k8s.find_requests(verb="patch", resource="podgroups", subresource="status")
        if r.name == name and r.group == "scheduling.k8s.io"
    )


@pytest.mark.parametrize("version", ["v1alpha2", "v1alpha3"])
async def test_a_gang_of_four_binds_together_and_its_condition_is_written_once(
    k8s: K8sHandle, version: str
) -> None:
    serve(k8s, version)
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create(UPSTREAM, workload_group("train", ns, version, 4), namespace=ns)
    for i in range(4):
        await k8s.create("pods", member(f"train-{i}", ns, "train"), namespace=ns)
    async with running_operator(k8s):
        await wait_bound(k8s, *(f"train-{i}" for i in range(4)))
        cond = await _condition(k8s, ns, "train", CONDITION[version], "True")
        assert cond["reason"] == "Scheduled"
        await asyncio.sleep(1.0)  # more sessions: nothing more to write
    assert _status_writes(k8s, "train") == 1


async def test_a_gang_that_cannot_all_fit_binds_none_and_says_why_once(k8s: K8sHandle) -> None:
    serve(k8s, "v1alpha3")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="3"))
    await k8s.create(UPSTREAM, workload_group("big", ns, "v1alpha3", 4), namespace=ns)
    for i in range(4):
        await k8s.create("pods", member(f"big-{i}", ns, "big"), namespace=ns)
    async with running_operator(k8s):
        cond = await _condition(k8s, ns, "big", "PodGroupInitiallyScheduled", "False")
        assert cond["reason"] == "Unschedulable"
        assert "4 minAvailable" in cond["message"]
        await asyncio.sleep(1.0)
    assert not any((p.get("spec") or {}).get("nodeName") for p in await k8s.list("pods", ns))
    assert _status_writes(k8s, "big") == 1


async def test_basic_pods_bind_one_by_one(k8s: K8sHandle) -> None:
    serve(k8s, "v1alpha2")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="2"))
    await k8s.create(UPSTREAM, workload_group("web", ns, "v1alpha2", None), namespace=ns)
    for i in range(3):
        await k8s.create("pods", member(f"web-{i}", ns, "web"), namespace=ns)
    async with running_operator(k8s):
        await _condition(k8s, ns, "web", "PodGroupScheduled", "True")
        await asyncio.sleep(1.0)
    bound = [p for p in await k8s.list("pods", ns) if (p.get("spec") or {}).get("nodeName")]
    assert len(bound) == 2  # as many as fit, each on its own


async def test_a_pod_whose_podgroup_does_not_exist_yet_waits_and_says_so(k8s: K8sHandle) -> None:
    serve(k8s, "v1alpha3")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create("pods", member("early", ns, "later"), namespace=ns)
    async with running_operator(k8s):
        waiting = await k8s.wait_for(
            "pods",
            "early",
            lambda p: any(
                c.get("type") == "PodScheduled"
                for c in (p.get("status") or {}).get("conditions") or []
            ),
            namespace=ns,
        )
        (cond,) = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["message"] == (
            f"waiting for its PodGroup {ns}/later ({UPSTREAM}) to be created"
        )
        await k8s.create(UPSTREAM, workload_group("later", ns, "v1alpha3", 1), namespace=ns)
        await wait_bound(k8s, "early")


async def test_a_cluster_without_the_api_schedules_as_before(k8s: K8sHandle) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create("pods", pod("plain", namespace=ns), namespace=ns)
    async with running_operator(k8s) as runtime:
        await wait_bound(k8s, "plain")
        (informer,) = [i for i in runtime.informers if i.kind.name == "WorkloadPodGroup"]
        assert informer.absent


async def test_pods_of_another_scheduler_in_a_podgroup_are_left_alone(k8s: K8sHandle) -> None:
    serve(k8s, "v1alpha3")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create(UPSTREAM, workload_group("theirs", ns, "v1alpha3", 1), namespace=ns)
    other = member("theirs-0", ns, "theirs")
    other["spec"]["schedulerName"] = "default-scheduler"
    await k8s.create("pods", other, namespace=ns)
    async with running_operator(k8s):
        await asyncio.sleep(1.5)
    assert not (await k8s.get("pods", "theirs-0", ns)).get("spec", {}).get("nodeName")
    assert _status_writes(k8s, "theirs") == 0


async def test_explain_reads_the_version_the_cluster_serves(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    serve(k8s, "v1alpha2")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="2"))
    await k8s.create(UPSTREAM, workload_group("trio", ns, "v1alpha2", 3), namespace=ns)
    for i in range(3):
        await k8s.create("pods", member(f"trio-{i}", ns, "trio"), namespace=ns)
    code, out, err = await cli(
        capsys, "explain", f"{ns}/trio-0", "--kubeconfig", str(k8s.kubeconfig_path)
    )
    assert code == 0, err
    assert f"({UPSTREAM} {ns}/trio, queue default)" in out
    assert "once minAvailable is satisfied" in out


async def test_a_podgroup_whose_pods_are_preempted_is_marked_a_disruption_target(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    serve(k8s, "v1alpha3")
    ns = k8s.namespace
    for name, value in (("low", 10), ("high", 1000)):
        await k8s.create("priorityclasses", {"metadata": {"name": name}, "value": value})
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create(UPSTREAM, workload_group("low", ns, "v1alpha3", 1), namespace=ns)
    for i in range(4):
        low = member(f"low-{i}", ns, "low")
        low["spec"]["priorityClassName"] = "low"
        await k8s.create("pods", low, namespace=ns)
    async with running_operator(k8s, scheduler_conf=preempt_policy(tmp_path)):
        await wait_bound(k8s, *(f"low-{i}" for i in range(4)))
        high = pod("high-0", namespace=ns, cpu="2")
        high["spec"]["priorityClassName"] = "high"
        await k8s.create("pods", high, namespace=ns)
        hit = await _condition(k8s, ns, "low", "DisruptionTarget", "True")
        scheduled = await _condition(k8s, ns, "low", "PodGroupInitiallyScheduled", "True")
    assert hit["reason"] == "PreemptionByScheduler"
    assert hit["message"].startswith("preempting 2 of its pods (low-")
    assert scheduled["reason"] == "Scheduled"  # never turned back to False


async def test_a_failed_binding_is_a_scheduler_error_until_the_gang_is_placed(
    k8s: K8sHandle,
) -> None:
    serve(k8s, "v1alpha2")
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create(UPSTREAM, workload_group("pair", ns, "v1alpha2", 2), namespace=ns)
    for i in range(2):
        await k8s.create("pods", member(f"pair-{i}", ns, "pair"), namespace=ns)
    k8s.fail_next(500, times=None, verb="create", resource="pods", subresource="binding")
    async with running_operator(k8s):
        failed = await _condition(k8s, ns, "pair", "PodGroupScheduled", "False")
        assert failed["reason"] == "SchedulerError"
        assert failed["message"].startswith("binding pair-")
        k8s.clear_faults()
        await wait_bound(k8s, "pair-0", "pair-1")
        cond = await _condition(k8s, ns, "pair", "PodGroupScheduled", "True")
    assert cond["reason"] == "Scheduled"
