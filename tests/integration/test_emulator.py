"""The Kubernetes API emulator, proven through the real clients the operator uses.

Every behaviour the operator relies on is exercised over HTTP with kubernetes-asyncio (typed
models, raw responses, the ``Watch`` helper) and with kopf running a tiny operator in-process, so
a deviation from apiserver semantics that would let operator tests pass wrongly shows up here.
Tests that need fault injection or the emulator's internals skip on a real cluster
(``CALDERA_E2E_KUBECONFIG``) and say why; the rest run there unchanged. Where a real API server
may legitimately do more than the emulator (its own controllers writing, events of its own, the
order of a merged list), the assertions allow for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import kopf
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from emulator import ApiError
from emulator.handles import K8sHandle

JsonDict = dict[str, Any]
VOLCANO = "scheduling.volcano.sh"
TEST_TIMEOUT = 30.0  # every test body is bounded; none of them asserts on speed


# No scheduler serves this name, so on a real cluster none writes to the test's pods (a
# PodScheduled condition, a binding) behind its back: their resourceVersions and watch events
# are the test's own.
NO_SCHEDULER = "caldera-test-nobody"


def pod(name: str, namespace: str = "default", **spec: Any) -> JsonDict:
    body: JsonDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "schedulerName": NO_SCHEDULER,
            **spec,
        },
    }
    return body


def queue(name: str, weight: int = 1) -> JsonDict:
    return {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


def podgroup(name: str, namespace: str = "default", min_member: int = 1) -> JsonDict:
    return {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def status_of(exc: ApiException) -> JsonDict:
    """The ``Status`` object of a failed call (the client keeps the raw body)."""
    assert exc.body is not None
    body: JsonDict = json.loads(exc.body)
    return body


async def new_namespace(k8s: K8sHandle) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await k8s.create("namespaces", {"metadata": {"name": name}})
    return name


async def until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Wait (bounded) until ``condition()`` is truthy."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


# -- discovery ------------------------------------------------------------------------------------


async def test_discovery_as_the_clients_read_it(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        api = await k8s.api_client()
        assert "v1" in (await client.CoreApi(api).get_api_versions()).versions
        groups = {g.name: g for g in (await client.ApisApi(api).get_api_versions()).groups}
        assert {VOLCANO, "topology.volcano.sh", "scheduling.k8s.io", "coordination.k8s.io"} <= set(
            groups
        )
        assert groups[VOLCANO].preferred_version.version == "v1beta1"
        assert (await client.VersionApi(api).get_code()).major == "1"

        core = {r.name: r for r in (await client.CoreV1Api(api).get_api_resources()).resources}
        assert core["pods"].namespaced and core["pods"].kind == "Pod"
        assert core["pods"].singular_name == "pod" and "po" in core["pods"].short_names
        assert {"create", "get", "list", "watch", "patch", "update", "delete"} <= set(
            core["pods"].verbs
        )
        assert core["pods/binding"].verbs == ["create"]
        assert set(core["pods/status"].verbs) == {"get", "patch", "update"}
        assert not core["nodes"].namespaced and not core["namespaces"].namespaced
        assert {"events", "configmaps"} <= set(core)

        custom = client.CustomObjectsApi(api)
        volcano = {
            r.name: r for r in (await custom.get_api_resources(VOLCANO, "v1beta1")).resources
        }
        assert not volcano["queues"].namespaced and "queues/status" in volcano
        assert volcano["podgroups"].namespaced and "podgroups/status" not in volcano
        topology = await custom.get_api_resources("topology.volcano.sh", "v1alpha1")
        names = {r.name: r for r in topology.resources}
        assert not names["hypernodes"].namespaced and "hypernodes/status" in names
        leases = await custom.get_api_resources("coordination.k8s.io", "v1")
        assert any(r.name == "leases" and r.namespaced for r in leases.resources)
        pcs = await custom.get_api_resources("scheduling.k8s.io", "v1")
        assert any(r.name == "priorityclasses" and not r.namespaced for r in pcs.resources)


# -- create / get / list ------------------------------------------------------------------------


async def test_create_assigns_metadata_and_refuses_duplicates(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        body = client.V1Pod(
            metadata=client.V1ObjectMeta(name="p1"),  # no namespace: defaulted from the URL
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        )
        created = await v1.create_namespaced_pod(ns, body)
        meta = created.metadata
        assert meta.namespace == ns and meta.uid and meta.creation_timestamp
        assert int(meta.resource_version) > 0
        assert created.spec.scheduler_name == "default-scheduler"
        assert created.status.phase == "Pending"

        with pytest.raises(ApiException) as exc_info:
            await v1.create_namespaced_pod(ns, body)
        assert exc_info.value.status == 409
        status = status_of(exc_info.value)
        assert status["kind"] == "Status" and status["apiVersion"] == "v1"
        assert status["status"] == "Failure" and status["reason"] == "AlreadyExists"
        assert status["code"] == 409

        with pytest.raises(ApiException) as exc_info:
            await v1.read_namespaced_pod("missing", ns)
        assert exc_info.value.status == 404 and status_of(exc_info.value)["reason"] == "NotFound"

        with pytest.raises(ApiException) as exc_info:
            await v1.create_namespaced_pod("no-such-namespace", pod("p2", "no-such-namespace"))
        assert exc_info.value.status == 404

        read = await v1.read_namespaced_pod("p1", ns)
        assert read.metadata.uid == meta.uid


async def test_lists_carry_a_resource_version_and_span_namespaces(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns1, ns2 = await new_namespace(k8s), await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        before = int((await v1.list_pod_for_all_namespaces()).metadata.resource_version)
        for name, ns in (("a", ns1), ("b", ns1), ("c", ns2)):
            await v1.create_namespaced_pod(ns, pod(name, ns))
        everywhere = await v1.list_pod_for_all_namespaces()
        assert int(everywhere.metadata.resource_version) > before
        mine = {(p.metadata.namespace, p.metadata.name) for p in everywhere.items}
        assert {(ns1, "a"), (ns1, "b"), (ns2, "c")} <= mine
        in_ns1 = await v1.list_namespaced_pod(ns1)
        assert [p.metadata.name for p in in_ns1.items] == ["a", "b"]

        first = await v1.list_namespaced_pod(ns1, limit=1)
        assert len(first.items) == 1 and first.metadata._continue
        rest = await v1.list_namespaced_pod(ns1, limit=1, _continue=first.metadata._continue)
        assert [p.metadata.name for p in rest.items] == ["b"] and not rest.metadata._continue


async def test_label_and_field_selectors(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        specs: list[tuple[str, dict[str, str], str]] = [
            ("a", {"app": "web", "tier": "front"}, "caldera"),
            ("b", {"app": "db"}, "caldera"),
            ("c", {}, "default-scheduler"),
        ]
        for name, labels, scheduler in specs:
            body = pod(name, ns, schedulerName=scheduler)
            body["metadata"]["labels"] = labels
            await v1.create_namespaced_pod(ns, body)
        await k8s.bind("b", "node-1", ns)

        async def names(**kwargs: str) -> list[str]:
            result = await v1.list_namespaced_pod(ns, **kwargs)
            return [p.metadata.name for p in result.items]

        assert await names(label_selector="app=web") == ["a"]
        assert await names(label_selector="app==web,tier=front") == ["a"]
        assert await names(label_selector="app!=web") == ["b", "c"]
        assert await names(label_selector="app in (web, db)") == ["a", "b"]
        assert await names(label_selector="app notin (web)") == ["b", "c"]
        assert await names(label_selector="tier") == ["a"]
        assert await names(label_selector="!app") == ["c"]
        assert await names(field_selector="spec.schedulerName=caldera") == ["a", "b"]
        assert await names(field_selector="spec.nodeName=") == ["a", "c"]
        assert await names(field_selector="spec.nodeName=node-1") == ["b"]
        assert await names(field_selector="status.phase!=Running,metadata.name!=c") == ["a", "b"]
        assert await names(field_selector=f"metadata.namespace={ns}") == ["a", "b", "c"]
        with pytest.raises(ApiException) as exc_info:
            await names(field_selector="spec.noSuchField=x")
        assert exc_info.value.status == 400


# -- pods/binding -----------------------------------------------------------------------------


def binding(name: str, node: str, annotations: dict[str, str] | None = None) -> Any:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )


async def test_binding_sets_node_merges_annotations_and_conflicts(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        created = await v1.create_namespaced_pod(ns, pod("p", ns))
        before = created.metadata.resource_version

        # The apiserver answers a binding with a Status, not a Binding: read the raw response.
        body = binding("p", "node-1", {"caldera.io/scheduled-by": "test"})
        response = await v1.create_namespaced_pod_binding("p", ns, body, _preload_content=False)
        async with response:
            assert response.status == 201
            assert (await response.json())["status"] == "Success"

        bound = await v1.read_namespaced_pod("p", ns)
        assert bound.spec.node_name == "node-1"
        # (merged into what the pod has: on a real cluster admission may have added some)
        assert bound.metadata.annotations.items() >= {"caldera.io/scheduled-by": "test"}.items()
        assert int(bound.metadata.resource_version) > int(before)
        scheduled = [c for c in bound.status.conditions if c.type == "PodScheduled"]
        assert scheduled and scheduled[0].status == "True"

        # _preload_content=False also means: no ApiException — the status must be checked.
        again = await v1.create_namespaced_pod_binding(
            "p", ns, binding("p", "node-2"), _preload_content=False
        )
        async with again:
            assert again.status == 409
            status = await again.json()
        assert status["reason"] == "Conflict" and "already assigned" in status["message"]
        assert (await v1.read_namespaced_pod("p", ns)).spec.node_name == "node-1"

        missing = await v1.create_namespaced_pod_binding(
            "ghost", ns, binding("ghost", "node-1"), _preload_content=False
        )
        async with missing:
            assert missing.status == 404


async def test_binding_with_preloaded_content_fails_to_deserialise(k8s: K8sHandle) -> None:
    """kubernetes-asyncio gotcha: the bind happens, then reading the Status as V1Binding fails."""
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        await v1.create_namespaced_pod(ns, pod("p", ns))
        with pytest.raises(ValueError, match="target"):
            await v1.create_namespaced_pod_binding("p", ns, binding("p", "node-1"))
        assert (await v1.read_namespaced_pod("p", ns)).spec.node_name == "node-1"


# -- update / status / patch / delete ----------------------------------------------------------


async def test_replace_with_a_stale_resource_version_conflicts(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        first = await v1.create_namespaced_pod(ns, pod("p", ns))
        first.metadata.labels = {"round": "1"}
        second = await v1.replace_namespaced_pod("p", ns, first)
        assert second.metadata.labels == {"round": "1"}
        assert int(second.metadata.resource_version) > int(first.metadata.resource_version)

        first.metadata.labels = {"round": "stale"}  # still carries the old resourceVersion
        with pytest.raises(ApiException) as exc_info:
            await v1.replace_namespaced_pod("p", ns, first)
        assert exc_info.value.status == 409
        assert status_of(exc_info.value)["reason"] == "Conflict"

        # A no-op replace does not produce a new resourceVersion.
        same = await v1.replace_namespaced_pod("p", ns, second)
        assert same.metadata.resource_version == second.metadata.resource_version


async def test_pod_status_subresource(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        created = await v1.create_namespaced_pod(ns, pod("p", ns))

        # PUT status: only the status changes, even if the body carries other changes.
        created.status.phase = "Running"
        created.status.conditions = [client.V1PodCondition(type="Ready", status="False")]
        created.spec.active_deadline_seconds = 99
        updated = await v1.replace_namespaced_pod_status("p", ns, created)
        assert updated.status.phase == "Running"
        assert updated.spec.active_deadline_seconds is None

        # The main endpoint ignores status.
        updated.status.phase = "Failed"
        updated.metadata.labels = {"x": "y"}
        main = await v1.replace_namespaced_pod("p", ns, updated)
        assert main.status.phase == "Running" and main.metadata.labels == {"x": "y"}

        # A dict body is sent as a strategic merge patch: conditions merge by type.
        patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
        patched = await v1.patch_namespaced_pod_status("p", ns, patch)
        assert {c.type: c.status for c in patched.status.conditions} == {
            "Ready": "False",
            "PodScheduled": "True",
        }
        patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        patched = await v1.patch_namespaced_pod_status("p", ns, patch)
        assert {c.type: c.status for c in patched.status.conditions} == {
            "Ready": "True",
            "PodScheduled": "True",
        }
        read = await v1.read_namespaced_pod_status("p", ns)
        assert read.status.phase == "Running"


async def test_patch_flavours(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        body = pod("p", ns)
        body["metadata"]["labels"] = {"a": "1", "b": "2"}
        body["metadata"]["finalizers"] = ["example.com/one"]
        created = await v1.create_namespaced_pod(ns, body)

        merge = {"metadata": {"labels": {"a": None, "c": "3"}}}
        patched = await v1.patch_namespaced_pod(
            "p", ns, merge, _content_type="application/merge-patch+json"
        )
        assert patched.metadata.labels == {"b": "2", "c": "3"}

        # Strategic merge (the client's default for a dict): finalizers merge as a set (in no
        # order to count on: a real API server may put the patch's own entries first).
        patched = await v1.patch_namespaced_pod(
            "p", ns, {"metadata": {"finalizers": ["example.com/two"]}}
        )
        assert sorted(patched.metadata.finalizers) == ["example.com/one", "example.com/two"]

        # A list body is a JSON patch.
        one = patched.metadata.finalizers.index("example.com/one")
        ops = [
            {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
            {"op": "remove", "path": f"/metadata/finalizers/{one}"},
        ]
        patched = await v1.patch_namespaced_pod("p", ns, ops)
        assert patched.metadata.annotations == {"k": "v"}
        assert patched.metadata.finalizers == ["example.com/two"]
        with pytest.raises(ApiException) as exc_info:
            await v1.patch_namespaced_pod("p", ns, [{"op": "test", "path": "/x", "value": 1}])
        assert exc_info.value.status == 422

        # A resourceVersion inside a patch is a precondition.
        stale = {"metadata": {"resourceVersion": created.metadata.resource_version, "labels": {}}}
        with pytest.raises(ApiException) as exc_info:
            await v1.patch_namespaced_pod(
                "p", ns, stale, _content_type="application/merge-patch+json"
            )
        assert exc_info.value.status == 409

        # Pod specs are immutable: nodeName only moves through pods/binding.
        with pytest.raises(ApiException) as exc_info:
            await v1.patch_namespaced_pod("p", ns, {"spec": {"nodeName": "node-1"}})
        assert exc_info.value.status == 422
        await v1.patch_namespaced_pod("p", ns, {"metadata": {"finalizers": None}})


async def test_delete_grace_period_and_finalizers(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        await v1.create_namespaced_pod(ns, pod("plain", ns))
        await v1.delete_namespaced_pod("plain", ns, grace_period_seconds=0)
        assert await k8s.find("pods", "plain", ns) is None
        with pytest.raises(ApiException) as exc_info:
            await v1.delete_namespaced_pod("plain", ns)
        assert exc_info.value.status == 404

        held = pod("held", ns)
        held["metadata"]["finalizers"] = ["example.com/hold"]
        await v1.create_namespaced_pod(ns, held)
        await v1.delete_namespaced_pod("held", ns, grace_period_seconds=0)
        marked = await v1.read_namespaced_pod("held", ns)
        assert marked.metadata.deletion_timestamp is not None
        await v1.patch_namespaced_pod(
            "held",
            ns,
            {"metadata": {"finalizers": None}},
            _content_type="application/merge-patch+json",
        )
        assert await k8s.find("pods", "held", ns) is None


async def test_queues_podgroups_and_hypernodes_as_custom_objects(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        custom = client.CustomObjectsApi(await k8s.api_client())
        name = f"q-{uuid.uuid4().hex[:6]}"
        body = queue(name)
        body["status"] = {"state": "Ignored"}  # the status subresource drops it on create
        created = await custom.create_cluster_custom_object(VOLCANO, "v1beta1", "queues", body)
        assert "status" not in created and created["metadata"]["generation"] == 1

        created["status"] = {"state": "Open", "running": 0}
        with_status = await custom.replace_cluster_custom_object_status(
            VOLCANO, "v1beta1", "queues", name, created
        )
        assert with_status["status"] == {"state": "Open", "running": 0}
        assert with_status["metadata"]["generation"] == 1  # status writes keep the generation

        with_status["spec"]["weight"] = 5
        with_status["status"] = {"state": "Closed"}  # ignored by the main endpoint
        replaced = await custom.replace_cluster_custom_object(
            VOLCANO, "v1beta1", "queues", name, with_status
        )
        assert replaced["spec"]["weight"] == 5 and replaced["status"]["state"] == "Open"
        assert replaced["metadata"]["generation"] == 2

        # Custom resources refuse strategic merge patches (415) and unconditional updates (422).
        with pytest.raises(ApiException) as exc_info:
            await custom.patch_cluster_custom_object(
                VOLCANO,
                "v1beta1",
                "queues",
                name,
                {"spec": {"weight": 1}},
                _content_type="application/strategic-merge-patch+json",
            )
        assert exc_info.value.status == 415
        del replaced["metadata"]["resourceVersion"]
        with pytest.raises(ApiException) as exc_info:
            await custom.replace_cluster_custom_object(VOLCANO, "v1beta1", "queues", name, replaced)
        assert exc_info.value.status == 422
        # The client sends a dict body to custom objects as a JSON patch unless told otherwise.
        with pytest.raises(ApiException) as exc_info:
            await custom.patch_cluster_custom_object(
                VOLCANO, "v1beta1", "queues", name, {"spec": {"weight": 7}}
            )
        assert exc_info.value.status == 400
        merged = await custom.patch_cluster_custom_object(
            VOLCANO,
            "v1beta1",
            "queues",
            name,
            {"spec": {"weight": 7}},
            _content_type="application/merge-patch+json",
        )
        assert merged["spec"]["weight"] == 7

        # PodGroups have no status subresource: status travels with a whole-object PUT.
        pg = await custom.create_namespaced_custom_object(
            VOLCANO, "v1beta1", ns, "podgroups", podgroup("pg", ns)
        )
        pg["status"] = {"phase": "Inqueue"}
        pg = await custom.replace_namespaced_custom_object(
            VOLCANO, "v1beta1", ns, "podgroups", "pg", pg
        )
        assert pg["status"] == {"phase": "Inqueue"}
        stale = dict(pg, status={"phase": "Running"})
        stale["metadata"] = dict(pg["metadata"], resourceVersion="1")
        with pytest.raises(ApiException) as exc_info:
            await custom.replace_namespaced_custom_object(
                VOLCANO, "v1beta1", ns, "podgroups", "pg", stale
            )
        assert exc_info.value.status == 409
        everywhere = await custom.list_cluster_custom_object(VOLCANO, "v1beta1", "podgroups")
        assert everywhere["kind"] == "PodGroupList" and everywhere["metadata"]["resourceVersion"]
        assert {i["kind"] for i in everywhere["items"]} == {"PodGroup"}
        # (a real cluster may hold PodGroups in other namespaces too)
        assert [
            i["metadata"]["name"] for i in everywhere["items"] if i["metadata"]["namespace"] == ns
        ] == ["pg"]
        in_ns = await custom.list_namespaced_custom_object(VOLCANO, "v1beta1", ns, "podgroups")
        assert [i["metadata"]["name"] for i in in_ns["items"]] == ["pg"]

        hn_name = f"hn-{uuid.uuid4().hex[:6]}"
        hn = await custom.create_cluster_custom_object(
            "topology.volcano.sh",
            "v1alpha1",
            "hypernodes",
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": hn_name},
                # at least one member: the CRD says minItems 1, as Volcano's does
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}],
                },
            },
        )
        hn["status"] = {"nodeCount": 0}
        hn = await custom.replace_cluster_custom_object_status(
            "topology.volcano.sh", "v1alpha1", "hypernodes", hn_name, hn
        )
        assert hn["status"] == {"nodeCount": 0}
        await custom.delete_cluster_custom_object(
            "topology.volcano.sh", "v1alpha1", "hypernodes", hn_name
        )
        await custom.delete_cluster_custom_object(VOLCANO, "v1beta1", "queues", name)


async def test_priority_admission_and_other_builtins(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        api = await k8s.api_client()
        v1 = client.CoreV1Api(api)
        pc_name = f"high-{uuid.uuid4().hex[:6]}"
        pc = client.V1PriorityClass(metadata=client.V1ObjectMeta(name=pc_name), value=1000)
        await client.SchedulingV1Api(api).create_priority_class(pc)
        created = await v1.create_namespaced_pod(ns, pod("p", ns, priorityClassName=pc_name))
        assert created.spec.priority == 1000
        with pytest.raises(ApiException) as exc_info:
            await v1.create_namespaced_pod(ns, pod("q", ns, priorityClassName="no-such-class"))
        assert exc_info.value.status == 403
        await client.SchedulingV1Api(api).delete_priority_class(pc_name)

        cm = await v1.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"k": "v"})
        )
        assert cm.data == {"k": "v"}
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="leader"),
            spec=client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=15),
        )
        coordination = client.CoordinationV1Api(api)
        created_lease = await coordination.create_namespaced_lease(ns, lease)
        created_lease.spec.holder_identity = "you"
        await coordination.replace_namespaced_lease("leader", ns, created_lease)
        with pytest.raises(ApiException) as exc_info:  # the loser of a leader race gets a 409
            await coordination.replace_namespaced_lease("leader", ns, created_lease)
        assert exc_info.value.status == 409
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="e1"),
            involved_object=client.V1ObjectReference(kind="Pod", name="p", namespace=ns),
            reason="Scheduled",
            message="assigned",
            type="Normal",
        )
        await v1.create_namespaced_event(ns, event)
        events = await v1.list_namespaced_event(ns, field_selector="involvedObject.name=p")
        # only events about p; on a real cluster its own scheduler may have some about p too
        assert {e.involved_object.name for e in events.items} == {"p"}
        assert [e.reason for e in events.items if e.metadata.name == "e1"] == ["Scheduled"]
        node = await v1.create_node(
            {"metadata": {"name": f"n-{ns}"}, "status": {"capacity": {"cpu": "4"}}}
        )
        assert node.status.capacity == {"cpu": "4"}
        await v1.delete_node(f"n-{ns}")


# -- watch ------------------------------------------------------------------------------------


async def test_watch_resumes_from_a_resource_version_and_gets_410_after_compaction(
    k8s: K8sHandle,
) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        await v1.create_namespaced_pod(ns, pod("before", ns))
        rv = (await v1.list_namespaced_pod(ns)).metadata.resource_version
        await v1.create_namespaced_pod(ns, pod("after", ns))
        # Other kinds' changes in the same span are not replayed into the pod stream.
        await v1.create_namespaced_config_map(ns, {"metadata": {"name": "not-a-pod"}})
        await v1.delete_namespaced_pod("before", ns)

        seen: list[tuple[str, str]] = []
        async with watch.Watch() as w:
            stream = w.stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5)
            async for event in stream:
                seen.append((event["type"], event["object"].metadata.name))
                if seen[-1] == ("DELETED", "before"):
                    w.stop()
        # A real API server first marks the pod for deletion (MODIFIED), even with no grace.
        marks = seen[1:-1]
        assert seen[0] == ("ADDED", "after") and seen[-1] == ("DELETED", "before")
        assert set(marks) <= {("MODIFIED", "before")}

        k8s.needs_emulator(
            "the rest compacts the watch history on demand, which a real API server cannot be "
            "told to do"
        )
        k8s.compact()
        with pytest.raises(ApiException) as exc_info:
            async with watch.Watch() as w:
                async for _ in w.stream(
                    v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5
                ):
                    pass
        assert exc_info.value.status == 410
        assert any(r.note == "error 410" for r in k8s.find_requests(verb="watch"))


async def test_watch_initial_state_bookmarks_and_timeout(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        await v1.create_namespaced_pod(ns, pod("existing", ns))
        types: list[str] = []
        async with watch.Watch() as w:
            stream = w.stream(
                v1.list_namespaced_pod, ns, allow_watch_bookmarks=True, timeout_seconds=3
            )
            async for event in stream:  # ends by itself after timeoutSeconds
                types.append(event["type"])
                if event["type"] == "BOOKMARK":
                    assert int(event["raw_object"]["metadata"]["resourceVersion"]) > 0
        assert types[0] == "ADDED" and "BOOKMARK" in types


async def test_watch_selectors_see_objects_leave_and_enter(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())
        await v1.create_namespaced_pod(ns, pod("p", ns))
        rv = (await v1.list_namespaced_pod(ns)).metadata.resource_version
        await k8s.bind("p", "node-1", ns)

        async def events(field_selector: str) -> list[tuple[str, str | None]]:
            seen: list[tuple[str, str | None]] = []
            async with watch.Watch() as w:
                stream = w.stream(
                    v1.list_namespaced_pod,
                    ns,
                    field_selector=field_selector,
                    resource_version=rv,
                    timeout_seconds=2,
                )
                async for event in stream:
                    seen.append((event["type"], event["object"].spec.node_name))
                    w.stop()
            return seen

        # The bind is a MODIFIED event; through a selector it is a leave or an arrival.
        # A DELETED carries the object as it last matched (not yet bound), as kube-apiserver's
        # watch cache sends it.
        assert await events("spec.nodeName=") == [("DELETED", None)]
        assert await events("spec.nodeName=node-1") == [("ADDED", "node-1")]
        assert await events("spec.nodeName=node-2") == []


async def test_direct_writes_reach_open_watches(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it writes straight into the emulator's store, bypassing HTTP")
    async with asyncio.timeout(TEST_TIMEOUT):
        emulator = k8s.emulator
        v1 = client.CoreV1Api(await k8s.api_client())
        rv = str(emulator.resource_version)
        emulator.create("pods", pod("direct"))
        emulator.patch("pods", "direct", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
        emulator.delete("pods", "direct", "default")
        seen: list[str] = []
        async with watch.Watch() as w:
            stream = w.stream(
                v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
            )
            async for event in stream:
                seen.append(event["type"])
                if len(seen) == 3:
                    w.stop()
        assert seen == ["ADDED", "MODIFIED", "DELETED"]
        assert emulator.list("pods", "default") == []


# -- faults and the request log ----------------------------------------------------------------


async def test_injected_failures_hangs_and_drops(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it makes requests fail, hang and lose their answers on purpose")
    async with asyncio.timeout(TEST_TIMEOUT):
        ns = await new_namespace(k8s)
        v1 = client.CoreV1Api(await k8s.api_client())

        rule = k8s.fail_next(503, verb="create", resource="pods", retry_after=1)
        with pytest.raises(ApiException) as exc_info:
            await v1.create_namespaced_pod(ns, pod("p", ns))
        headers = exc_info.value.headers
        assert exc_info.value.status == 503
        assert headers is not None and headers["Retry-After"] == "1"
        assert status_of(exc_info.value)["reason"] == "ServiceUnavailable"
        assert rule.hits == 1 and await k8s.find("pods", "p", ns) is None
        await v1.create_namespaced_pod(ns, pod("p", ns))  # the rule is used up

        # The binding happens, the answer never comes: the retry must cope with a 409.
        k8s.hang_next(apply=True, verb="create", subresource="binding", name="p")
        with pytest.raises(asyncio.TimeoutError):
            await v1.create_namespaced_pod_binding(
                "p", ns, binding("p", "node-1"), _preload_content=False, _request_timeout=0.5
            )
        assert (await k8s.get("pods", "p", ns))["spec"]["nodeName"] == "node-1"
        retry = await v1.create_namespaced_pod_binding(
            "p", ns, binding("p", "node-1"), _preload_content=False
        )
        async with retry:
            assert retry.status == 409

        k8s.drop_next(verb="patch", resource="pods")
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await v1.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"a": "b"}}})
        assert "labels" not in (await k8s.get("pods", "p", ns))["metadata"]

        bindings = k8s.find_requests(
            verb="create", resource="pods", subresource="binding", name="p"
        )
        assert [(r.status, r.fault) for r in bindings] == [(None, "hang"), (409, "")]
        drops = [r for r in k8s.requests if r.fault == "drop"]
        assert len(drops) == 1 and drops[0].touches("metadata.labels")


async def test_closing_watches_ends_streams_cleanly_or_by_reset(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it ends the API server's open watches on demand")
    async with asyncio.timeout(TEST_TIMEOUT):
        v1 = client.CoreV1Api(await k8s.api_client())

        async def consume() -> list[str]:
            async with watch.Watch() as w:
                stream = w.stream(v1.list_namespace, timeout_seconds=20)
                return [event["type"] async for event in stream]

        task = asyncio.create_task(consume())
        await until(lambda: k8s.emulator.open_watches == 1)
        assert k8s.close_watches() == 1
        assert "ADDED" in await task  # the stream ended without an error

        task = asyncio.create_task(consume())
        await until(lambda: k8s.emulator.open_watches == 1)
        k8s.close_watches(abort=True)
        with pytest.raises(aiohttp.ClientPayloadError):
            await task


# -- kopf ------------------------------------------------------------------------------------


@dataclass
class Seen:
    """What the kopf event handlers received: (event type, name), in order."""

    pods: list[tuple[str | None, str]] = field(default_factory=list)
    queues: list[tuple[str | None, str]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def kopf_operator(k8s: K8sHandle) -> AsyncIterator[Seen]:
    """Run a tiny kopf operator in-process against ``k8s``; stop it via its stop flag."""
    registry = kopf.OperatorRegistry()
    seen = Seen()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.scanning.disabled = True  # no CRD/namespace observation: resources are known
        settings.posting.enabled = False
        settings.networking.error_backoffs = [0.1, 0.2, 0.5]

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return k8s.connection_info()

    @kopf.on.event("pods", registry=registry)
    def on_pod(event: kopf.RawEvent, name: str | None, **_: Any) -> None:
        seen.pods.append((event["type"], name or ""))

    @kopf.on.event(f"queues.{VOLCANO}", registry=registry)
    def on_queue(event: kopf.RawEvent, name: str | None, **_: Any) -> None:
        seen.queues.append((event["type"], name or ""))

    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=True,
            stop_flag=stop,
            ready_flag=ready,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), timeout=10)
        yield seen
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)


def no_kopf_writes_on_pods(k8s: K8sHandle) -> None:
    """kopf never writes to pods, and no request carries kopf's annotations or finalizers."""
    writes = [
        r for r in k8s.requests if r.resource == "pods" and r.verb not in ("get", "list", "watch")
    ]
    assert writes == [], [(r.verb, r.path) for r in writes]
    for record in k8s.requests:
        body = json.dumps(record.body) if record.body is not None else ""
        assert "kopf.zalando.org" not in body, (record.verb, record.path)


async def test_kopf_receives_listing_and_events(k8s: K8sHandle) -> None:
    k8s.needs_emulator(
        "it writes straight into the emulator's store and reads kopf's requests from its log"
    )
    async with asyncio.timeout(TEST_TIMEOUT):
        emulator = k8s.emulator
        emulator.create("pods", pod("early"))
        emulator.create("queues", queue("early-q"))
        async with kopf_operator(k8s) as seen:
            await until(lambda: (None, "early") in seen.pods and (None, "early-q") in seen.queues)

            emulator.create("pods", pod("late"))
            emulator.patch(
                "pods", "late", {"metadata": {"labels": {"x": "1"}}}, namespace="default"
            )
            emulator.bind("late", "node-1")
            emulator.delete("pods", "late", "default")
            emulator.create("queues", queue("late-q"))
            emulator.update_status(
                "queues", {**emulator.get("queues", "late-q"), "status": {"state": "Open"}}
            )

            expected_pods = [
                ("ADDED", "late"),
                ("MODIFIED", "late"),
                ("MODIFIED", "late"),
                ("DELETED", "late"),
            ]
            await until(lambda: [e for e in seen.pods if e[1] == "late"] == expected_pods)
            await until(
                lambda: (
                    [e for e in seen.queues if e[1] == "late-q"]
                    == [("ADDED", "late-q"), ("MODIFIED", "late-q")]
                )
            )

        assert k8s.find_requests(verb="discovery", name="")  # kopf resolved resources via discovery
        assert k8s.find_requests(verb="list", resource="pods")
        no_kopf_writes_on_pods(k8s)


async def test_kopf_survives_disconnects_and_410(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it ends kopf's watches and compacts the watch history on demand")
    async with asyncio.timeout(TEST_TIMEOUT):
        emulator = k8s.emulator
        emulator.create("pods", pod("first"))
        async with kopf_operator(k8s) as seen:
            await until(lambda: (None, "first") in seen.pods)
            await until(lambda: emulator.open_watches == 2)  # pods and queues

            # A clean end of every stream: kopf resumes from its last resourceVersion.
            emulator.close_watches()
            emulator.create("pods", pod("after-close"))
            await until(lambda: ("ADDED", "after-close") in seen.pods)

            # A connection reset: the same.
            await until(lambda: emulator.open_watches == 2)
            emulator.close_watches(abort=True)
            emulator.create("pods", pod("after-reset"))
            await until(lambda: ("ADDED", "after-reset") in seen.pods)

            # History compacted while disconnected: the resume gets 410, kopf relists and goes on.
            await until(lambda: emulator.open_watches == 2)
            lists_before = len(emulator.find_requests(verb="list", resource="pods"))
            emulator.compact()
            emulator.close_watches()
            await until(
                lambda: len(emulator.find_requests(verb="list", resource="pods")) > lists_before
            )
            await until(lambda: seen.pods.count((None, "first")) >= 2)  # the relisting
            emulator.create("pods", pod("after-410"))
            await until(lambda: ("ADDED", "after-410") in seen.pods)

        gone = [
            r
            for r in emulator.find_requests(verb="watch", resource="pods")
            if r.note == "error 410"
        ]
        assert gone, "kopf never resumed into the compacted history"
        no_kopf_writes_on_pods(k8s)


async def test_kopf_retries_through_injected_list_failures(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it makes kopf's list requests fail on purpose")
    async with asyncio.timeout(TEST_TIMEOUT):
        k8s.emulator.create("pods", pod("p"))
        rule = k8s.fail_next(500, times=2, verb="list", resource="pods")
        async with kopf_operator(k8s) as seen:
            await until(lambda: (None, "p") in seen.pods)
        assert rule.hits == 2


async def test_handle_helpers_and_kubeconfig(k8s: K8sHandle) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        assert k8s.kubeconfig_path.exists()
        info = k8s.connection_info()
        assert info.server == k8s.url
        ns = await new_namespace(k8s)
        created = await k8s.create("pods", {**pod("h", ns), "status": {"phase": "Running"}})
        assert created["status"]["phase"] == "Running"  # the helper keeps a given status
        listed = await k8s.list("pods", ns, field_selector="status.phase=Running")
        assert [p["metadata"]["name"] for p in listed] == ["h"]
        updated = await k8s.patch("pods", "h", {"metadata": {"labels": {"a": "b"}}}, namespace=ns)
        assert updated["metadata"]["labels"] == {"a": "b"}
        with pytest.raises(ApiError) as exc_info:
            await k8s.update("pods", created)  # stale resourceVersion
        assert exc_info.value.code == 409
        await k8s.bind("h", "node-1", ns)
        bound = await k8s.wait_for("pods", "h", lambda p: p["spec"].get("nodeName"), namespace=ns)
        assert bound["spec"]["nodeName"] == "node-1"
        await k8s.delete("pods", "h", ns)
        assert await k8s.find("pods", "h", ns) is None
