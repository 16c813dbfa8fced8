"""The operator end to end: real kopf and kubernetes-asyncio clients against the API emulator.

On a real cluster (``CALDERA_E2E_KUBECONFIG``) the same tests run in a namespace of their own
(``k8s.namespace``). What only the emulator can show (its request log, injected faults, kinds
or objects a real cluster would handle differently) is checked there alone: a test that is about
nothing else skips on a real cluster and says why; the others check the rest there.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from caldera.framework.policy import DEFAULT_POLICY_YAML
from caldera.operator.watch import informer
from emulator import ResourceType
from emulator.handles import K8sHandle
from integration.harness import (
    node,
    pod,
    podgroup,
    queue,
    running_operator,
    wait_bound,
    wait_event,
)

SESSIONS = pytest.mark.parametrize("session_process", [False, True], ids=["thread", "process"])
"""Sessions in a thread of the operator (the default) and in a process of their own."""


@SESSIONS
async def test_a_gang_is_bound_and_its_podgroup_and_queue_status_written(
    k8s: K8sHandle, session_process: bool
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    await k8s.create("nodes", node("n2"))
    await k8s.create("podgroups", podgroup("train", 3, namespace=ns), namespace=ns)
    for i in range(3):
        await k8s.create("pods", pod(f"train-{i}", group="train", namespace=ns), namespace=ns)
    async with running_operator(k8s, session_process=session_process):
        placed = await wait_bound(k8s, "train-0", "train-1", "train-2")
        assert set(placed.values()) <= {"n1", "n2"}
        pg = await k8s.wait_for(
            "podgroups",
            "train",
            lambda o: (
                (o.get("status") or {}).get("phase") == "Inqueue"
                or (o.get("status") or {}).get("phase") == "Running"
            ),
            namespace=ns,
        )
        assert any(c["type"] == "Scheduled" for c in pg["status"]["conditions"])
        q = await k8s.wait_for(
            "queues",
            "default",
            lambda o: (o.get("status") or {}).get("allocated", {}).get("cpu") == "3",
        )
        assert q["status"]["state"] == "Open"
        await asyncio.sleep(0)


@SESSIONS
async def test_what_changes_between_sessions_reaches_the_next_one(
    k8s: K8sHandle, session_process: bool
) -> None:
    # the sessions keep their own view of the cluster: a pod deleted frees its cpu, a node
    # cordoned takes no more pods, a node added takes them
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="2"))
    for name in ("a", "b"):
        await k8s.create("pods", pod(name, namespace=ns), namespace=ns)
    async with running_operator(k8s, session_process=session_process):
        await wait_bound(k8s, "a", "b")
        await k8s.create("pods", pod("c", namespace=ns), namespace=ns)
        await k8s.wait_for(
            "pods",
            "c",
            lambda o: any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
            namespace=ns,
        )
        await k8s.delete("pods", "a", ns)
        assert await wait_bound(k8s, "c") == {"c": "n1"}
        await k8s.patch("nodes", "n1", {"spec": {"unschedulable": True}})
        await k8s.delete("pods", "b", ns)
        await k8s.create("pods", pod("d", namespace=ns), namespace=ns)
        await asyncio.sleep(0.5)  # sessions run (every 0.2 s at least): n1 is cordoned
        assert not (await k8s.get("pods", "d", ns))["spec"].get("nodeName")
        await k8s.create("nodes", node("n2", cpu="2"))
        assert await wait_bound(k8s, "d") == {"d": "n2"}


async def test_pods_are_listed_in_pages_at_the_latest_version_and_the_rest_in_one_piece(
    k8s: K8sHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    k8s.needs_emulator("reads the emulator's request log")
    monkeypatch.setattr(informer, "LIST_PAGE", 2)
    ns = k8s.namespace
    for name in ("n1", "n2", "n3"):
        await k8s.create("nodes", node(name, cpu="2"))
    for i in range(5):
        await k8s.create("pods", pod(f"p-{i}", namespace=ns), namespace=ns)
    k8s.emulator.clear_requests()
    async with running_operator(k8s):
        await wait_bound(k8s, *(f"p-{i}" for i in range(5)))
    # pages of two, two and one, the next asked for by its continue token
    pods = k8s.find_requests(verb="list", resource="pods")
    assert [r.query.get("limit") for r in pods] == ["2", "2", "2"]
    assert ["resourceVersion" in r.query for r in pods] == [False, False, False]
    assert [bool(r.query.get("continue")) for r in pods] == [False, True, True]
    # nodes at any version (the API server's watch cache), which comes in one piece
    (nodes,) = k8s.find_requests(verb="list", resource="nodes")
    assert nodes.query.get("resourceVersion") == "0"


async def _pods_with_successful_bindings(k8s: K8sHandle) -> list[str]:
    return [
        r.name
        for r in k8s.find_requests(verb="create", resource="pods", subresource="binding")
        if r.status is not None and 200 <= r.status < 300
    ]


async def test_a_gang_that_cannot_fit_binds_nothing_and_says_why(k8s: K8sHandle) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="2"))
    group = await k8s.create("podgroups", podgroup("big", 3, namespace=ns), namespace=ns)
    for i in range(3):
        await k8s.create("pods", pod(f"big-{i}", group="big", namespace=ns), namespace=ns)
    async with running_operator(k8s):
        pg = await k8s.wait_for(
            "podgroups",
            "big",
            lambda o: any(
                c.get("type") == "Unschedulable"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
            namespace=ns,
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
                namespace=ns,
            )
            sched = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
            assert (sched["status"], sched["reason"]) == ("False", reason)
        await asyncio.sleep(1.0)  # several sessions
    if k8s.emulated:  # not even a failed binding request (the emulator's request log)
        assert await _pods_with_successful_bindings(k8s) == []
    assert not any((p.get("spec") or {}).get("nodeName") for p in await k8s.list("pods", ns))
    warnings = await k8s.events_about(group, "Unschedulable")
    assert len(warnings) == 1  # an event when the news is new, not one per session


def _writes(k8s: K8sHandle) -> list[tuple[str, str, str]]:
    """(verb, resource, subresource) of every write, but for the queues' own (defaults, the
    built-in queues, ``allocated``), which do not grow with the pods."""
    return sorted(
        (r.verb, r.resource, r.subresource)
        for r in k8s.requests
        if r.verb in ("create", "update", "patch", "delete") and r.resource != "queues"
    )


async def test_a_bare_pod_costs_its_binding_and_one_scheduled_event_and_nothing_else(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    created = {}
    for name in ("lonely", "alone"):
        created[name] = await k8s.create("pods", pod(name, namespace=ns), namespace=ns)
    async with running_operator(k8s):
        await wait_bound(k8s, "lonely", "alone")
        await wait_event(k8s, "Scheduled", created["alone"])
        await asyncio.sleep(0.5)
    if k8s.emulated:  # the cost is counted in the emulator's request log
        assert (
            _writes(k8s)
            == [("create", "events", ""), ("create", "events", "")]
            + [("create", "pods", "binding")] * 2
        )
    assert await k8s.list("podgroups", ns) == []
    obj = await k8s.get("pods", "lonely", namespace=ns)
    assert "scheduling.k8s.io/group-name" not in (obj["metadata"].get("annotations") or {})
    event = await wait_event(k8s, "Scheduled", created["lonely"])
    assert event["message"] == f"Successfully assigned {ns}/lonely to n1"
    for pod_ in created.values():
        assert len(await k8s.events_about(pod_)) == 1


async def test_with_events_off_a_bare_pod_costs_only_its_binding(k8s: K8sHandle) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    quiet = await k8s.create("pods", pod("quiet", namespace=ns), namespace=ns)
    async with running_operator(k8s, post_events=False):
        await wait_bound(k8s, "quiet")
        await asyncio.sleep(0.5)
    if k8s.emulated:  # the cost is counted in the emulator's request log
        assert _writes(k8s) == [("create", "pods", "binding")]
    assert await k8s.events_about(quiet) == []


async def test_asked_to_act_as_volcano_a_bare_pod_gets_a_podgroup_and_its_annotation(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    created = await k8s.create("pods", pod("lonely", namespace=ns), namespace=ns)
    async with running_operator(k8s, create_podgroups=True):
        await wait_bound(k8s, "lonely")
    uid = created["metadata"]["uid"]
    pg = await k8s.get("podgroups", f"podgroup-{uid}", namespace=ns)
    assert pg["spec"]["minMember"] == 1
    obj = await k8s.get("pods", "lonely", namespace=ns)
    assert obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"podgroup-{uid}"


async def test_bare_pods_of_one_controller_start_together_as_its_annotation_asks(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator(
        "a real cluster's ReplicaSet controller would adopt, release or delete the hand-made "
        "replicas of a ReplicaSet; and the one read per controller is counted in the request log"
    )
    k8s.emulator.registry.register(ResourceType("apps", "v1", "replicasets", "ReplicaSet", True))
    await k8s.create("nodes", node("n1", cpu="2"))
    rs = await k8s.create(
        "replicasets",
        {
            "metadata": {
                "name": "web",
                "namespace": "default",
                "annotations": {"scheduling.volcano.sh/group-min-member": "3"},
            },
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        },
        namespace="default",
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web",
        "uid": rs["metadata"]["uid"],
        "controller": True,
    }
    for i in range(3):
        replica = pod(f"web-{i}")
        replica["metadata"]["ownerReferences"] = [owner]
        await k8s.create("pods", replica, namespace="default")
    async with running_operator(k8s):
        # three one-cpu pods on a two-cpu node: the gang of three cannot start, so none does
        for name in ("web-0", "web-1", "web-2"):
            await k8s.wait_for(
                "pods",
                name,
                lambda o: any(
                    c.get("type") == "PodScheduled"
                    for c in (o.get("status") or {}).get("conditions") or []
                ),
                namespace="default",
            )
        await k8s.create("nodes", node("n2", cpu="2"))
        placed = await wait_bound(k8s, "web-0", "web-1", "web-2")
    assert set(placed.values()) == {"n1", "n2"}
    reads = k8s.find_requests(verb="get", resource="replicasets", name="web")
    assert len(reads) == 1  # one read per controller, not per pod
    assert await _pods_with_successful_bindings(k8s) != []


async def test_bind_failures_are_retried_until_each_pod_is_bound_exactly_once(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("it makes binding requests fail, hang and lose their answers")
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
    # a bind that got no answer says which request and how long it waited
    assert any("binding: no answer within 0.5s" in e["message"] for e in errors), errors


async def test_scheduling_survives_watch_restarts_and_expired_history(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it resets the operator's watches and compacts the watch history")
    await k8s.create("nodes", node("n1", cpu="8"))
    await k8s.create("pods", pod("before"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "before")
        k8s.close_watches(abort=True)
        k8s.compact()
        await k8s.create("pods", pod("after"), namespace="default")
        await wait_bound(k8s, "after", timeout=30)


@SESSIONS
async def test_a_restarted_operator_rebuilds_its_state_and_binds_nothing_twice(
    k8s: K8sHandle, session_process: bool
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="4"))
    for i in range(3):
        await k8s.create("pods", pod(f"first-{i}", namespace=ns), namespace=ns)
    async with running_operator(k8s, session_process=session_process):
        await wait_bound(k8s, "first-0", "first-1", "first-2")
    for i in range(2):
        await k8s.create("pods", pod(f"second-{i}", namespace=ns), namespace=ns)
    waiting: dict[str, dict[str, Any]] = {}
    async with running_operator(k8s, session_process=session_process):
        for name in ("second-0", "second-1"):
            waiting[name] = await k8s.wait_for(
                "pods",
                name,
                lambda o: (
                    bool(o["spec"].get("nodeName"))
                    or any(
                        c.get("type") == "PodScheduled"
                        for c in (o.get("status") or {}).get("conditions") or []
                    )
                ),
                namespace=ns,
            )
        await asyncio.sleep(1.0)
    # the restarted scheduler counted the pods already on n1: only one of the two new one-cpu
    # pods fits the four-cpu node (which one is a tie on creation time)
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in await k8s.list("pods", ns)}
    assert [nodes[f"first-{i}"] for i in range(3)] == ["n1"] * 3
    assert len([name for name in ("second-0", "second-1") if nodes[name]]) == 1
    assert len([p for p in waiting.values() if p["spec"].get("nodeName")]) <= 1
    if k8s.emulated:  # and each pod was bound once (the emulator's request log)
        bound = await _pods_with_successful_bindings(k8s)
        assert sorted(bound)[:3] == ["first-0", "first-1", "first-2"]
        assert len(bound) == 4 and len(set(bound)) == 4


async def test_a_malformed_object_is_reported_and_skipped_while_others_schedule(
    k8s: K8sHandle, caplog: pytest.LogCaptureFixture
) -> None:
    k8s.needs_emulator(
        "a real API server refuses (400) a pod whose cpu request is not a quantity, so such an "
        "object cannot reach the operator there"
    )
    await k8s.create("nodes", node("n1"))
    broken = await k8s.create("pods", pod("broken", cpu="1x"), namespace="default")
    await k8s.create("pods", pod("fine"), namespace="default")
    with caplog.at_level(logging.WARNING):
        async with running_operator(k8s):
            await wait_bound(k8s, "fine")
            event = await wait_event(k8s, "InvalidObject", broken)
    assert "spec.containers[0].resources.requests" in event["message"]
    assert any("Pod default/broken" in r.getMessage() for r in caplog.records)
    assert not (await k8s.get("pods", "broken", namespace="default"))["spec"].get("nodeName")


async def test_a_policy_change_applies_and_an_invalid_one_keeps_the_old_policy(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    without_backfill = DEFAULT_POLICY_YAML.replace(
        '"enqueue, allocate, backfill"', '"enqueue, allocate"'
    )
    conf.write_text(without_backfill)
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    best_effort = pod("best-effort", namespace=ns)
    best_effort["spec"]["containers"][0]["resources"] = {}
    await k8s.create("pods", best_effort, namespace=ns)
    await k8s.create("pods", pod("normal", namespace=ns), namespace=ns)
    async with running_operator(k8s, scheduler_conf=str(conf)) as runtime:
        await wait_bound(k8s, "normal")
        await asyncio.sleep(0.6)  # a few sessions: no backfill, so the best-effort pod waits
        assert not (await k8s.get("pods", "best-effort", namespace=ns))["spec"].get("nodeName")
        conf.write_text(without_backfill.replace('allocate"', 'allocate, teleport"'))
        await asyncio.sleep(0.6)
        assert [a.name for a in runtime.policy.policy.actions] == ["enqueue", "allocate"]
        registry = runtime.metrics.registry
        assert registry.get_sample_value("caldera_policy_warnings") == 0
        # a plugin Caldera does not have is passed over (counted), the rest applies
        conf.write_text(DEFAULT_POLICY_YAML.replace("name: gang", "name: gnag"))
        await wait_bound(k8s, "best-effort")
        assert registry.get_sample_value("caldera_policy_warnings") == 1
        assert "gang" not in runtime.policy.policy.layout[0]


async def test_only_the_leader_schedules_when_two_instances_run(k8s: K8sHandle) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="8"))
    election = {
        "leader_elect": True,
        "lock_namespace": ns,
        "lease_duration": 3.0,
        "renew_deadline": 2.0,
        "retry_period": 1.0,
    }
    async with (
        running_operator(k8s, **election) as first,
        running_operator(k8s, **election) as second,
    ):
        for i in range(4):
            await k8s.create("pods", pod(f"p-{i}", namespace=ns), namespace=ns)
        await wait_bound(k8s, *(f"p-{i}" for i in range(4)))
        await asyncio.sleep(0.5)
        leaders = [rt for rt in (first, second) if rt.leader.leading]
        assert len(leaders) == 1
        follower = second if leaders[0] is first else first
        assert follower.scheduler is not None and follower.scheduler.sessions == 0
        assert leaders[0].scheduler is not None and leaders[0].scheduler.sessions > 0
        lease = await k8s.get("leases", "volcano", namespace=ns)
        assert lease["spec"]["holderIdentity"] == leaders[0].leader.identity
    if k8s.emulated:  # each pod bound once (the emulator's request log)
        assert sorted(await _pods_with_successful_bindings(k8s)) == [f"p-{i}" for i in range(4)]


async def test_kopf_never_writes_bookkeeping_onto_pods_nodes_or_podgroups(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    await k8s.create("podgroups", podgroup("g", 1, namespace=ns), namespace=ns)
    await k8s.create("pods", pod("g-0", group="g", namespace=ns), namespace=ns)
    await k8s.create("pods", pod("bare", namespace=ns), namespace=ns)
    async with running_operator(k8s):
        await wait_bound(k8s, "g-0", "bare")
        await asyncio.sleep(0.6)
    if k8s.emulated:  # the requests themselves (the emulator's request log)
        writes = [r for r in k8s.requests if r.verb in ("create", "update", "patch")]
        assert not [r for r in writes if r.resource == "nodes"]
        for r in writes:
            if r.resource in ("pods", "podgroups"):
                assert not r.touches("metadata.finalizers"), r
                body = r.body if isinstance(r.body, dict) else {}
                annotations = (body.get("metadata") or {}).get("annotations") or {}
                assert not [k for k in annotations if "kopf" in k], r
    for obj in (await k8s.list("pods", ns)) + (await k8s.list("podgroups", ns)):
        assert not obj["metadata"].get("finalizers")
        assert not [k for k in obj["metadata"].get("annotations") or {} if "kopf" in k]
    n1 = await k8s.get("nodes", "n1")
    assert not [k for k in n1["metadata"].get("annotations") or {} if "kopf" in k]


async def test_an_idle_cluster_gets_no_events_or_writes_per_session(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it counts the write requests of idle sessions in the request log")
    await k8s.create("nodes", node("n1"))
    await k8s.create("pods", pod("p"), namespace="default")
    async with running_operator(k8s) as runtime:
        await wait_bound(k8s, "p")
        await asyncio.sleep(1.5)  # queue status is written once, after a second's coalescing
        before = len([r for r in k8s.requests if r.verb in ("create", "update", "patch")])
        sessions = runtime.scheduler.sessions if runtime.scheduler else 0
        await asyncio.sleep(1.0)
        after = len([r for r in k8s.requests if r.verb in ("create", "update", "patch")])
        assert runtime.scheduler is not None and runtime.scheduler.sessions > sessions + 2
    assert after == before


async def _wait_named_event(k8s: K8sHandle, reason: str, name: str) -> dict[str, Any]:
    """An event about an object known only by name, in ``k8s.namespace``."""
    selector = f"involvedObject.name={name}"
    for _ in range(100):
        for event in await k8s.list("events", k8s.namespace, field_selector=selector):
            if event.get("reason") == reason:
                return event
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {reason} event for {name}")


async def test_an_invalid_policy_reload_is_recorded_on_the_scheduler_pod(
    k8s: K8sHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(DEFAULT_POLICY_YAML)
    # The scheduler's own pod is only named (Downward API), not read, so its event carries no
    # uid to match: a name of this test's own, in this test's namespace, keeps older events out.
    name = f"caldera-scheduler-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("POD_NAME", name)
    monkeypatch.setenv("POD_NAMESPACE", k8s.namespace)
    async with running_operator(k8s, scheduler_conf=str(conf)):
        await asyncio.sleep(0.5)
        conf.write_text(DEFAULT_POLICY_YAML.replace("backfill", "backfil"))
        event = await _wait_named_event(k8s, "InvalidPolicy", name)
    assert ": actions: " in event["message"]
    assert "unknown action 'backfil' (did you mean 'backfill'?)" in event["message"]


async def test_queues_get_their_defaults_and_root_comes_back(k8s: K8sHandle) -> None:
    await k8s.create("queues", queue("research", weight=3))
    async with running_operator(k8s):
        research = await k8s.wait_for(
            "queues",
            "research",
            lambda o: (
                (o.get("status") or {}).get("state") == "Open" and o["spec"].get("parent") == "root"
            ),
        )
        assert research["spec"]["weight"] == 3
        root = await k8s.get("queues", "root")
        assert "parent" not in root["spec"] or not root["spec"]["parent"]
        await k8s.delete("queues", "root")
        await k8s.wait_for(
            "queues", "root", lambda o: o["metadata"]["uid"] != root["metadata"]["uid"], timeout=20
        )


async def test_the_evictor_marks_the_pod_then_deletes_it(k8s: K8sHandle) -> None:
    from caldera.framework.intents import Evict

    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    # another scheduler's pod (no scheduler on a real cluster is called this: the test binds it)
    victim = await k8s.create(
        "pods", pod("victim", scheduler="someone-else", namespace=ns), namespace=ns
    )
    await k8s.bind("victim", "n1", ns)
    async with running_operator(k8s) as runtime:
        assert runtime.writers is not None
        runtime.writers.evictor.submit(Evict(ns, "victim", victim["metadata"]["uid"], "preempt"))
        # Deleted with its grace period: gone at once on the emulator; on a real cluster a bound
        # pod has no kubelet to stop it, so it stays, marked for deletion (Terminating).
        last = None
        for _ in range(100):
            last = await k8s.find("pods", "victim", namespace=ns)
            if last is None or last["metadata"].get("deletionTimestamp"):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("victim not deleted")
        event = await wait_event(k8s, "Evict", victim)
    assert event["message"] == "Pod is evicted, because of preempt"
    if k8s.emulated:  # the pod is gone: what was written is in the request log
        patches = k8s.find_requests(
            verb="patch", resource="pods", subresource="status", name="victim"
        )
        written = [patches[0].body["status"]]
    else:  # a Terminating pod shows what was written (a pod already gone shows nothing)
        written = [last["status"]] if last is not None else []
    for status in written:
        conditions = {c["type"]: c for c in status["conditions"]}
        assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "Evict")
        assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"


async def test_podgroup_status_is_patched_without_a_version_and_retried_after_a_failure(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("it makes a status patch fail and reads the patches from the request log")
    await k8s.create("nodes", node("n1"))
    await k8s.create("podgroups", podgroup("g", 1), namespace="default")
    await k8s.create("pods", pod("g-0", group="g"), namespace="default")
    k8s.fail_next(500, verb="patch", resource="podgroups", name="g", times=1)
    async with running_operator(k8s):
        await k8s.wait_for(
            "podgroups",
            "g",
            lambda o: (o.get("status") or {}).get("phase") in ("Inqueue", "Running"),
            namespace="default",
        )
    patches = k8s.find_requests(verb="patch", resource="podgroups", name="g")
    assert patches[0].status == 500 and any(p.status == 200 for p in patches[1:])
    for p in patches:
        assert set(p.body) == {"status"}  # the scheduler's own field only: nothing to conflict
    assert not k8s.find_requests(verb="update", resource="podgroups")
    assert not k8s.find_requests(verb="get", resource="podgroups")


async def test_every_kind_the_scheduler_needs_is_watched(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it reads the operator's watches from the request log")
    await k8s.create("nodes", node("n1"))
    await k8s.create("pods", pod("p"), namespace="default")
    async with running_operator(k8s):
        await wait_bound(k8s, "p")
    watched = {r.resource for r in k8s.requests if r.verb == "watch"}
    assert {"pods", "nodes", "podgroups", "queues", "priorityclasses", "hypernodes"} <= watched


async def test_the_spread_selectors_are_watched_and_a_service_spreads_its_pods(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("it reads the operator's watches from the request log")
    for rt in (
        ResourceType("", "v1", "services", "Service", True),
        ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
        ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ):
        k8s.emulator.registry.register(rt)
    for name in ("n1", "n2"):
        await k8s.create("nodes", node(name, **{"kubernetes.io/hostname": name}))
    service = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}
    await k8s.create("services", service, namespace="default")
    # one running pod on each node, so resources tie and n1 (first by name) would win
    for name, app, on in (("web-0", "web", "n1"), ("other-0", "other", "n2")):
        running = pod(name, scheduler="default-scheduler")
        running["metadata"]["labels"] = {"app": app}
        running["spec"]["nodeName"] = on
        await k8s.create("pods", running, namespace="default")
    pending = pod("web-1")
    pending["metadata"]["labels"] = {"app": "web"}
    await k8s.create("pods", pending, namespace="default")
    async with running_operator(k8s):
        assert await wait_bound(k8s, "web-1", namespace="default") == {"web-1": "n2"}
    for resource in ("services", "replicationcontrollers", "replicasets", "statefulsets"):
        verbs = {r.verb for r in k8s.requests if r.resource == resource}
        assert {"list", "watch"} <= verbs, resource


def _serve_storage(k8s: K8sHandle) -> None:
    """The emulator serves what the other tests need; the storage kinds are added here (a real
    cluster serves them, but the test helpers only know the emulator's default kinds)."""
    status = {"status": ("get", "patch", "update")}
    for rt in (
        ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, subresources=status),
        ResourceType(
            "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, subresources=status
        ),
        ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
        ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ):
        k8s.emulator.registry.register(rt)


async def _volume_cluster(k8s: K8sHandle) -> None:
    """n1 and n2; claim ``data`` can only use the local volume on n2; claim ``scratch`` is
    provisioned dynamically; pod ``db`` uses both."""
    _serve_storage(k8s)
    for name in ("n1", "n2"):
        await k8s.create("nodes", node(name, **{"kubernetes.io/hostname": name}))
    for name, provisioner in (("local", "kubernetes.io/no-provisioner"), ("fast", "csi.example")):
        await k8s.create(
            "storageclasses",
            {
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
    host_n2 = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}
    await k8s.create(
        "persistentvolumes",
        {
            "metadata": {"name": "local-n2"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [host_n2]}]}
                },
            },
            "status": {"phase": "Available"},
        },
    )
    for claim, cls in (("data", "local"), ("scratch", "fast")):
        await k8s.create(
            "persistentvolumeclaims",
            {
                "metadata": {"name": claim, "namespace": "default"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": cls,
                    "resources": {"requests": {"storage": "5Gi"}},
                },
            },
            namespace="default",
        )
    db = pod("db")
    db["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
    ]
    await k8s.create("pods", db, namespace="default")


async def test_volume_decisions_are_written_before_the_pod_is_bound(k8s: K8sHandle) -> None:
    k8s.needs_emulator(
        "it reads the order of the writes from the request log, and a real cluster's "
        "PersistentVolume controller would bind the claims itself"
    )
    await _volume_cluster(k8s)
    async with running_operator(k8s):
        assert await wait_bound(k8s, "db") == {"db": "n2"}
    data = await k8s.get("persistentvolumeclaims", "data", namespace="default")
    pv = await k8s.get("persistentvolumes", "local-n2")
    ref = pv["spec"]["claimRef"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
        "PersistentVolumeClaim",
        "default",
        "data",
        data["metadata"]["uid"],
    )
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    scratch = await k8s.get("persistentvolumeclaims", "scratch", namespace="default")
    assert scratch["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n2"
    order = [
        (r.verb, r.resource, r.subresource, r.name)
        for r in k8s.requests
        if (
            r.resource in ("persistentvolumes", "persistentvolumeclaims")
            and r.verb not in ("list", "watch", "get")
        )
        or r.subresource == "binding"
    ]
    assert order == [
        ("patch", "persistentvolumes", "", "local-n2"),
        ("patch", "persistentvolumeclaims", "", "scratch"),
        ("create", "pods", "binding", "db"),
    ]
    watched = {r.resource for r in k8s.requests if r.verb == "watch"}
    assert {"persistentvolumes", "persistentvolumeclaims", "storageclasses", "csinodes"} <= watched


async def test_a_failed_volume_write_sends_the_pod_back_to_be_scheduled_again(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("it makes a PersistentVolume write fail")
    await _volume_cluster(k8s)
    k8s.fail_next(409, verb="patch", resource="persistentvolumes", name="local-n2", times=1)
    async with running_operator(k8s):
        assert await wait_bound(k8s, "db", timeout=30) == {"db": "n2"}
    patches = k8s.find_requests(verb="patch", resource="persistentvolumes", name="local-n2")
    assert [p.status for p in patches][:2] == [409, 200]
    assert await _pods_with_successful_bindings(k8s) == ["db"]
    errors = [e for e in await k8s.list("events") if e.get("reason") == "FailedScheduling"]
    assert any('running PreBind plugin "VolumeBinding": HTTP 409' in e["message"] for e in errors)


def _serve_dra(k8s: K8sHandle) -> None:
    """The DRA kinds of ``resource.k8s.io/v1`` (a real cluster serves them)."""
    status = {"status": ("get", "patch", "update")}
    for rt in (
        ResourceType(
            "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, subresources=status
        ),
        ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
        ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ):
        k8s.emulator.registry.register(rt)


async def test_a_claim_allocation_is_written_before_the_pod_is_bound(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator(
        "it reads the order of the writes from the request log (and needs resource.k8s.io/v1, "
        "which a real cluster serves only from Kubernetes 1.34 on)"
    )
    _serve_dra(k8s)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        DEFAULT_POLICY_YAML.replace(
            "- name: predicates",
            "- name: predicates\n    arguments:\n"
            "      predicate.DynamicResourceAllocationEnable: true",
        )
    )
    for name in ("n1", "n2"):
        await k8s.create("nodes", node(name))
    driver = "gpu.example.com"
    await k8s.create(
        "deviceclasses",
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    await k8s.create(
        "resourceslices",
        {
            "metadata": {"name": "n2-gpus"},
            "spec": {
                "driver": driver,
                "nodeName": "n2",
                "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "h100"}}}],
            },
        },
    )
    await k8s.create(
        "resourceclaims",
        {
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}
            },
        },
        namespace="default",
    )
    trainer = pod("trainer")
    trainer["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimName": "gpu"}]
    await k8s.create("pods", trainer, namespace="default")
    async with running_operator(k8s, scheduler_conf=str(conf)):
        assert await wait_bound(k8s, "trainer") == {"trainer": "n2"}
    bound = await k8s.get("pods", "trainer", namespace="default")
    written = await k8s.get("resourceclaims", "gpu", namespace="default")
    assert written["status"]["allocation"]["devices"]["results"] == [
        {"request": "g", "driver": driver, "pool": "n2", "device": "gpu-0"}
    ]
    assert written["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": bound["metadata"]["uid"]}
    ]
    order = [
        (r.verb, r.resource, r.subresource, r.name)
        for r in k8s.requests
        if (r.resource == "resourceclaims" and r.verb not in ("list", "watch", "get"))
        or r.subresource == "binding"
    ]
    assert order == [
        ("patch", "resourceclaims", "status", "gpu"),
        ("create", "pods", "binding", "trainer"),
    ]
    watched = {r.resource for r in k8s.requests if r.verb == "watch"}
    assert {"resourceclaims", "deviceclasses", "resourceslices"} <= watched


async def test_the_operator_watches_each_nodes_numa_topology(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it serves the Numatopology CRD without installing it")
    name = f"numa-{k8s.namespace}"
    topology = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "restricted"},
            "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
        },
    }
    await k8s.create("numatopologies", topology)
    async with running_operator(k8s) as runtime:
        assert runtime.cache is not None
        cache = runtime.cache
        await cache.synced.wait()
        assert cache.state.numatopologies[name].topology_manager_policy == "restricted"
        await k8s.delete("numatopologies", name)
        async with asyncio.timeout(10):
            while name in cache.state.numatopologies:
                await asyncio.sleep(0.05)
