"""`caldera explain` and `caldera simulate` with ``--kubeconfig``: the same answers as on exported
manifests, read over HTTP from the cluster with nothing but GET requests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.cli import main
from caldera.k8s.live import ReadOnly, ReadOnlyError, read_cluster
from caldera.k8s.resources import PODS, resource_of
from caldera.k8s.rest import Rest
from caldera.models.kinds import KINDS
from emulator.handles import K8sHandle
from integration.harness import VOLCANO, node, pod, podgroup, queue


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``caldera ARGV`` in a thread (it runs its own event loop; the emulator serves this one)."""
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def export(k8s: K8sHandle, path: Path) -> str:
    """Every object the scheduler reads, as ``kubectl get -o yaml`` would write it."""
    docs = [
        {"apiVersion": kind.api_version, "kind": kind.name, **item}
        for kind in KINDS.values()
        for item in await served(k8s, kind.plural)
    ]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    return str(path)


async def served(k8s: K8sHandle, plural: str) -> list[dict[str, Any]]:
    try:
        return await k8s.list(plural)
    except Exception:  # noqa: BLE001 - a kind this server does not serve has no objects
        return []


async def a_cluster_with_a_gang_too_big_for_it(k8s: K8sHandle) -> str:
    """Two 4-cpu nodes, one mostly taken by another scheduler's pod; a gang of two 3-cpu pods in
    queue research, and a bare 1.5-cpu pod of ours. Returns the namespace."""
    ns = k8s.namespace
    await k8s.create("nodes", node("a", cpu="4"))
    await k8s.create("nodes", node("b", cpu="4"))
    await k8s.create("queues", queue("research", weight=2))
    await k8s.create("podgroups", podgroup("train", 2, queue="research", namespace=ns))
    await k8s.create("pods", pod("other", cpu="3", namespace=ns, scheduler="default-scheduler"))
    await k8s.bind("other", "a", namespace=ns)
    for name in ("train-0", "train-1"):
        await k8s.create("pods", pod(name, group="train", cpu="3", namespace=ns), namespace=ns)
    await k8s.create("pods", pod("lone", cpu="1500m", namespace=ns), namespace=ns)
    return ns


async def test_explain_on_the_live_cluster_says_what_it_says_on_the_exported_manifests(
    k8s: K8sHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = await a_cluster_with_a_gang_too_big_for_it(k8s)
    kubeconfig = str(k8s.kubeconfig_path)
    code, live, err = await cli(
        capsys, "explain", f"{ns}/train-0", "--kubeconfig", kubeconfig, "--output", "json"
    )
    assert (code, err) == (0, "")
    exported = await export(k8s, tmp_path / "cluster.yaml")
    code, offline, _ = await cli(capsys, "explain", f"{ns}/train-0", exported, "--output", "json")
    assert code == 0
    assert json.loads(live) == json.loads(offline)
    doc = json.loads(live)
    # the other scheduler's pod holds node a; the pods the session placed before train-0 took
    # b: the verdict counts both nodes, and the table shows them as the session saw them
    assert doc["verdict"] == "Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    assert doc["view"] == "nodes as the session saw them when it last tried the pod"
    assert doc["nodes"]["a"]["reasons"] == {"NodeResourcesFit": ["Insufficient cpu"]}
    assert doc["nodes"]["b"]["reasons"] == {"NodeResourcesFit": ["Insufficient cpu"]}


async def test_simulate_with_a_new_job_shows_where_it_would_go_among_the_clusters_pods(
    k8s: K8sHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = await a_cluster_with_a_gang_too_big_for_it(k8s)
    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump_all(
            [
                podgroup("infer", 1, queue="research", namespace=ns),
                pod("infer-0", group="infer", cpu="2", namespace=ns),
            ]
        )
    )
    code, out, err = await cli(
        capsys, "simulate", "--kubeconfig", str(k8s.kubeconfig_path), str(job), "--output", "json"
    )
    assert (code, err) == (0, "")
    doc = json.loads(out)
    binds = {b["pod"]: b["node"] for b in doc["binds"]}
    # node a has 1 cpu left beside the other scheduler's pod: the new 2-cpu pod goes to b, as
    # does the bare pod of ours (in a group of its own); the gang of two 3-cpu pods gets none
    assert binds == {f"{ns}/infer-0": "b", f"{ns}/lone": "b"}
    assert doc["podGroups"][f"{ns}/train"]["phase"] != "Running"


async def test_an_object_in_the_manifests_replaces_the_clusters_object_of_that_name(
    k8s: K8sHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = await a_cluster_with_a_gang_too_big_for_it(k8s)
    what_if = tmp_path / "what-if.yaml"
    what_if.write_text(yaml.safe_dump(node("a", cpu="8")))
    code, out, _ = await cli(
        capsys,
        "simulate",
        "--kubeconfig",
        str(k8s.kubeconfig_path),
        str(what_if),
        "--output",
        "json",
    )
    assert code == 0
    # with 8 cpus, node a holds one of the gang's pods beside the other scheduler's 3-cpu pod
    binds = {b["pod"]: b["node"] for b in json.loads(out)["binds"]}
    assert sorted(binds[f"{ns}/train-{i}"] for i in range(2)) == ["a", "b"]


async def test_a_listing_whose_version_expired_is_made_again_page_by_page(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("injects a 410 and reads the request log")
    ns = k8s.namespace
    for i in range(5):
        await k8s.create("pods", pod(f"p-{i}", namespace=ns), namespace=ns)
    k8s.emulator.clear_requests()
    k8s.fail_next(410, verb="list", resource="pods", reason="Expired", message="too old")
    live = await read_cluster(str(k8s.kubeconfig_path), page=2)
    assert sorted(live.state.pods) == [f"{ns}/p-{i}" for i in range(5)]
    # the expired attempt, then three pages of two, two and one
    sent = k8s.find_requests(verb="list", resource="pods")
    assert [r.status for r in sent] == [410, 200, 200, 200]
    assert [bool(r.query.get("continue")) for r in sent] == [False, False, True, True]


async def test_reading_the_cluster_sends_only_get_requests_and_lists_every_kind(
    k8s: K8sHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s.needs_emulator("reads the emulator's request log")
    ns = await a_cluster_with_a_gang_too_big_for_it(k8s)
    kubeconfig = str(k8s.kubeconfig_path)
    k8s.emulator.clear_requests()
    assert (await cli(capsys, "explain", f"{ns}/train-0", "--kubeconfig", kubeconfig))[0] == 0
    assert (await cli(capsys, "simulate", "--kubeconfig", kubeconfig, "--cycles", "3"))[0] == 0
    sent = k8s.requests
    assert sent
    assert {r.method for r in sent} == {"GET"}
    # /version, then every kind at its cluster-wide path (a kind the emulator does not serve
    # answers 404 and counts as empty; one served at one of several versions is asked at each)
    paths = {
        resource_of(kind.at(version)).path()
        for kind in KINDS.values()
        for version in kind.all_versions
    }
    assert {r.path for r in sent} == {"/version", *paths}


async def test_the_read_only_client_refuses_a_write_before_sending_it(k8s: K8sHandle) -> None:
    k8s.needs_emulator("reads the emulator's request log")
    rest = Rest(await _configuration(k8s))
    try:
        k8s.emulator.clear_requests()
        reader = ReadOnly(rest)
        for verb in ("create", "update", "patch", "delete", "watch"):
            with pytest.raises(ReadOnlyError, match=f"refused to {verb} pods"):
                await reader.call(verb, PODS, namespace="default", name="x")
        assert k8s.requests == []
    finally:
        await rest.close()


async def test_a_list_the_credentials_may_not_make_is_one_line_naming_resource_and_verb(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s.needs_emulator("injects a 403")
    k8s.fail_next(
        403,
        verb="list",
        resource="podgroups",
        reason="Forbidden",
        message='podgroups.scheduling.volcano.sh is forbidden: User "alice" cannot list '
        'resource "podgroups" in API group "scheduling.volcano.sh" at the cluster scope',
    )
    code, out, err = await cli(
        capsys, "simulate", "--kubeconfig", str(k8s.kubeconfig_path), "--output", "json"
    )
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(f"caldera: not allowed to list podgroups.{VOLCANO} at {k8s.url}: ")
    assert f'verb "list" on resource "podgroups" in API group "{VOLCANO}"' in err


async def test_a_malformed_object_in_the_cluster_is_reported_and_the_rest_still_run(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s.needs_emulator("stores an object a real API server would refuse")
    ns = k8s.namespace
    await k8s.create("nodes", node("a", cpu="4"))
    await k8s.create("pods", pod("broken", cpu="1x", namespace=ns), namespace=ns)
    await k8s.create("pods", pod("fine", cpu="1", namespace=ns), namespace=ns)
    code, out, err = await cli(
        capsys, "simulate", "--kubeconfig", str(k8s.kubeconfig_path), "--output", "json"
    )
    assert code == 0
    assert err.splitlines() == [
        (
            f"caldera: {k8s.url}: Pod {ns}/broken: spec.containers[0].resources.requests: cpu: "
            "invalid quantity '1x': unknown suffix 'x'; skipped"
        )
    ]
    assert {b["pod"] for b in json.loads(out)["binds"]} == {f"{ns}/fine"}


async def test_a_pod_not_in_the_cluster_is_said_to_be_not_in_the_cluster(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    await k8s.create("nodes", node("a"))
    code, _, err = await cli(
        capsys, "explain", "default/nope", "--kubeconfig", str(k8s.kubeconfig_path)
    )
    assert code == 2
    assert err == "caldera: pod default/nope is not in the cluster\n"


async def test_a_cluster_without_nodes_is_a_one_line_error(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await cli(
        capsys, "explain", "default/nope", "--kubeconfig", str(k8s.kubeconfig_path)
    )
    assert code == 2
    assert err == "caldera: no nodes in the cluster: nothing to schedule on\n"


async def _configuration(k8s: K8sHandle) -> Any:
    from caldera.k8s.client import load_configuration

    return await load_configuration(str(k8s.kubeconfig_path))


async def test_credentials_the_server_does_not_accept_are_said_in_one_line(
    k8s: K8sHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s.needs_emulator("injects a 401")
    k8s.fail_next(401, times=None, reason="Unauthorized", message="Unauthorized")
    code, out, err = await cli(capsys, "explain", "p", "--kubeconfig", str(k8s.kubeconfig_path))
    assert (code, out) == (2, "")
    assert err == (
        f"caldera: the API server at {k8s.url} did not accept our credentials "
        "(HTTP 401: Unauthorized)\n"
    )
