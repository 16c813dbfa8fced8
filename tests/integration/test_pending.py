"""Why a pod is pending, as a cluster user sees it: the PodScheduled condition and its event."""

from __future__ import annotations

from collections import Counter
from typing import Any

from emulator.handles import K8sHandle
from integration.harness import node, pod, podgroup, running_operator


def _scheduled(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


async def test_a_pod_that_fits_nowhere_says_why_in_kube_schedulers_words(k8s: K8sHandle) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("small", cpu="1"))
    await k8s.create("nodes", node("tiny", cpu="500m"))
    await k8s.create("nodes", node("zoned", cpu="8", zone="b"))
    spec = pod("wants-zone-a", cpu="2", namespace=ns)
    spec["spec"]["nodeSelector"] = {"zone": "a"}
    created = await k8s.create("pods", spec, namespace=ns)
    # every node fails the selector (two have no zone label), and two also lack cpu: as
    # Volcano's FitErrors counts, a node short of cpu counts under that alone (the resource
    # check comes first), "<n> <reason>" entries sorted as strings
    expected = (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu."
    )
    async with running_operator(k8s):
        obj = await k8s.wait_for(
            "pods",
            "wants-zone-a",
            lambda o: (_scheduled(o) or {}).get("message") == expected,
            namespace=ns,
        )
    cond = _scheduled(obj)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    # the events about this very pod (by uid): not an older pod's of the same name
    events = await k8s.events_about(created, "FailedScheduling")
    assert [(e["type"], e["message"]) for e in events] == [("Warning", expected)]


async def test_a_pod_whose_podgroup_is_missing_is_told_so_in_its_condition(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    await k8s.create("pods", pod("orphan", group="ghost", namespace=ns), namespace=ns)
    expected = f"its PodGroup {ns}/ghost (podgroups.scheduling.volcano.sh) does not exist"
    async with running_operator(k8s):
        obj = await k8s.wait_for(
            "pods",
            "orphan",
            lambda o: (_scheduled(o) or {}).get("message") == expected,
            namespace=ns,
        )
    cond = _scheduled(obj)
    assert cond is not None and cond["reason"] == "Unschedulable"


async def test_the_metrics_count_waiting_pods_and_gangs_by_the_reasons_their_status_gives(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("only", cpu="2"))
    await k8s.create("podgroups", podgroup("pair", 2, namespace=ns), namespace=ns)
    for name in ("pair-0", "pair-1"):
        await k8s.create("pods", pod(name, group="pair", cpu="2", namespace=ns), namespace=ns)
    await k8s.create("pods", pod("huge", cpu="64", namespace=ns), namespace=ns)
    async with running_operator(k8s) as runtime:
        pods = {}
        for name in ("pair-0", "pair-1", "huge"):
            pods[name] = await k8s.wait_for("pods", name, _scheduled, namespace=ns)
        group = await k8s.wait_for(
            "podgroups",
            "pair",
            lambda o: any(
                c.get("type") == "Unschedulable" for c in o.get("status", {}).get("conditions", [])
            ),
            namespace=ns,
        )
        registry = runtime.metrics.registry
        # nothing changes any more, so the last session counted what the statuses say
        by_reason = Counter((_scheduled(p) or {})["reason"] for p in pods.values())
        for reason, count in by_reason.items():
            assert registry.get_sample_value("caldera_pending_pods", {"reason": reason}) == count
        assert by_reason["Unschedulable"] >= 1  # "huge" fits no node
        phase = group["status"]["phase"]
        assert phase in ("Pending", "Inqueue")
        counted = {"phase": phase, "reason": "NotEnoughResources"}
        # only "pair" is a PodGroup object: the bare pod's group lives in memory
        assert registry.get_sample_value("caldera_pending_podgroups", counted) == 1
        assert registry.get_sample_value("volcano_unschedule_job_count") == 1
