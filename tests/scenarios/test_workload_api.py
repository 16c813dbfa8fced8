"""``caldera simulate`` and ``explain`` read Kubernetes' own PodGroups (``scheduling.k8s.io``) from
manifests, as the operator watches them: a gang's ``minCount`` binds all or nothing, ``basic``
pods each on their own, and a pod whose PodGroup is missing says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import (
    default_policy_with,
    node,
    pod,
    podgroup,
    priority_class,
    scenario,
    workload_podgroup,
)
from caldera.cli import main

UPSTREAM = "podgroups.scheduling.k8s.io"


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _group(name: str, version: str, min_count: int | None) -> dict[str, Any]:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": policy},
    }


def _pod(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "schedulingGroup": {"podGroupName": group},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def _simulate(capsys: pytest.CaptureFixture[str], path: str) -> dict[str, Any]:
    assert main(["simulate", "--output", "json", path]) == 0
    doc: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize("version", ["v1alpha2", "v1alpha3"])
def test_a_gang_binds_only_when_min_count_pods_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    fits = [_node("n1", "3"), _group("fits", version, 3)]
    fits += [_pod(f"fits-{i}", "fits") for i in range(3)]
    doc = _simulate(capsys, _write(tmp_path, fits))
    assert sorted(b["pod"] for b in doc["binds"]) == [f"default/fits-{i}" for i in range(3)]
    too_big = [_node("n1", "3"), _group("too-big", version, 4)]
    too_big += [_pod(f"big-{i}", "too-big") for i in range(4)]
    doc = _simulate(capsys, _write(tmp_path, too_big))
    assert doc["binds"] == []
    assert doc["unschedulable"]["default/big-0"].endswith("once minAvailable is satisfied")


def test_basic_pods_are_placed_each_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [_node("n1", "2"), _group("web", "v1alpha2", None)]
    docs += [_pod(f"web-{i}", "web") for i in range(3)]
    doc = _simulate(capsys, _write(tmp_path, docs))
    assert len(doc["binds"]) == 2


def test_explain_says_a_pods_podgroup_does_not_exist_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [_node("n1", "2"), _pod("early", "later")])
    assert main(["explain", "early", path]) == 0
    out = capsys.readouterr().out
    assert f"waiting for its PodGroup default/later ({UPSTREAM}) to be created" in out


def test_a_podgroup_with_both_policies_is_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _group("both", "v1alpha3", 2)
    bad["spec"]["schedulingPolicy"]["basic"] = {}
    path = _write(tmp_path, [_node("n1", "2"), bad, _pod("p", "both")])
    assert main(["simulate", path]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert f"PodGroup ({UPSTREAM}) default/both" in text
    assert "exactly one of basic and gang must be set" in text


def test_preempting_a_podgroups_pods_marks_it_a_disruption_target() -> None:
    running = [
        pod(f"low-{i}", cpu="1", node_name="n1", priority_class="low", scheduling_group="low")
        for i in range(4)
    ]
    sim = scenario(
        [
            node("n1", cpu="4"),
            priority_class("low", 10),
            priority_class("high", 1000),
            workload_podgroup("low", min_count=1),
            *running,
            podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
            pod("high-0", group="high", cpu="2", priority_class="high"),
        ],
        policy_yaml=default_policy_with(actions="enqueue, allocate, preempt, backfill"),
    )
    (status,) = sim.cycles[0].result.workload_groups
    assert (status.name, status.scheduled, status.reason) == ("low", True, "Scheduled")
    assert status.disrupted.startswith("preempting 2 of its pods (low-")


def test_simulate_names_each_kind_of_podgroup_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [_node("n1", "1"), _group("big", "v1alpha3", 2)]
    docs += [_pod(f"big-{i}", "big") for i in range(2)]
    path = _write(tmp_path, docs)
    assert main(["simulate", path]) == 0
    table = capsys.readouterr().out
    assert f"waiting 1 podgroup(s) ({UPSTREAM}):" in table
    assert "default/big" in table
    doc = _simulate(capsys, path)
    assert doc["workloadPodGroups"]["default/big"]["scheduled"] is False
    assert "podGroups" in doc and "default/big" not in doc["podGroups"]
