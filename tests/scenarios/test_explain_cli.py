"""`caldera explain` and the pending sections of `caldera simulate`: why a pod is where it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from caldera.cli import main

NODES = """
apiVersion: v1
kind: Node
metadata: {name: big, labels: {zone: a}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: small, labels: {zone: a}}
status: {allocatable: {cpu: "1", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: tainted, labels: {zone: b}}
spec: {taints: [{key: gpu, value: "true", effect: NoSchedule}]}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
"""


def pod(name: str, cpu: str, extra: str = "", group: str = "") -> str:
    notes = f", annotations: {{scheduling.k8s.io/group-name: {group}}}" if group else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: web}}{notes}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
{extra}
"""


def write(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text("---".join(docs))
    return str(path)


def explain_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["explain", "--output", "json", *argv]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_every_node_gets_each_filters_verdict_and_each_scorers_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, "default/p", write(tmp_path, NODES, pod("p", "2")))
    assert doc["verdict"] == "bound to big"
    assert doc["node"] == "big"
    assert doc["view"] == "nodes as they are before the session, the pod on its own"
    nodes = doc["nodes"]
    assert nodes["small"] == {
        "fits": False,
        "reasons": {"NodeResourcesFit": ["Insufficient cpu"]},
        "scores": {},
        "total": None,
    }
    assert nodes["tainted"]["reasons"] == {
        "TaintToleration": ["node(s) had untolerated taint {gpu: true}"]
    }
    big = nodes["big"]
    assert big["fits"] is True
    # default weights: leastrequested 1, balancedresource 1, tainttoleration 3 (100 on the
    # only candidate); the scores shown are weighted and add up to the total
    assert big["scores"]["tainttoleration"] == 300
    assert sum(big["scores"].values()) == big["total"]
    assert doc["weights"]["tainttoleration"] == 3


def test_a_pod_that_fits_nowhere_gets_kubes_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = explain_json(capsys, "p", write(tmp_path, NODES, pod("p", "9")))
    assert doc["node"] is None
    # Volcano's FitErrors: the resource check comes first, so the tainted node short of cpu
    # counts under Insufficient cpu alone (allocate's predicate returns before the filters)
    assert doc["verdict"] == "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."
    assert doc["view"] == "nodes as the session saw them when it last tried the pod"
    assert all(
        n["reasons"] == {"NodeResourcesFit": ["Insufficient cpu"]} and n["total"] is None
        for n in doc["nodes"].values()
    )


def test_anti_affinity_shows_which_nodes_it_rules_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = """
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  schedulerName: volcano
  nodeName: big
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    anti = """  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        topologyKey: zone"""
    doc = explain_json(capsys, "p", write(tmp_path, NODES, running, pod("p", "1", anti)))
    reasons = doc["nodes"]["small"]["reasons"]
    assert reasons == {"InterPodAffinity": ["node(s) didn't match pod anti-affinity rules"]}
    assert doc["verdict"] == (
        "Unschedulable: 0/3 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
        "2 node(s) didn't match pod anti-affinity rules."
    )


def test_the_table_lists_fitting_nodes_by_score_then_the_rest_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "p", write(tmp_path, NODES, pod("p", "2"))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("pod default/p  (podgroups.scheduling.volcano.sh default/podgroup-")
    assert out[0].endswith(", queue default)")
    assert out[1] == "verdict: bound to big"
    assert out[2] == "nodes as they are before the session, the pod on its own:"
    header, *rows = out[3:]
    assert header.split()[:2] == ["NODE", "FITS"] and "WHY" in header
    assert [r.split()[0] for r in rows] == ["big", "small", "tainted"]
    assert rows[1].endswith("NodeResourcesFit: Insufficient cpu")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["default/nope"], "not in the manifests", id="unknown pod"),
        pytest.param(["default/bound"], "already bound to big", id="a bound pod"),
        pytest.param(["default/theirs"], "schedulerName 'default-scheduler'", id="not ours"),
    ],
)
def test_pods_that_cannot_be_explained_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    bound = pod("bound", "1", "  nodeName: big")
    theirs = pod("theirs", "1").replace(
        "schedulerName: volcano", "schedulerName: default-scheduler"
    )
    path = write(tmp_path, NODES, bound, theirs)
    assert main(["explain", *argv, path]) == 2
    assert message in capsys.readouterr().err


def test_simulate_lists_pending_pods_with_kubes_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", write(tmp_path, NODES, pod("p", "9"))]) == 0
    out = capsys.readouterr().out
    assert "  pending 1 pod(s):" in out
    assert "default/p  Unschedulable  0/3 nodes are available: 3 Insufficient cpu." in out
    assert main(["simulate", "--output", "json", write(tmp_path, NODES, pod("p", "9"))]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unschedulable"]["default/p"].startswith("0/3 nodes are available: ")


def test_the_verdict_is_the_next_sessions_and_a_gang_pod_waits_for_its_gang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gang = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: default}
spec: {minMember: 2}
"""
    first, second = pod("first", "6", group="pair"), pod("second", "6", group="pair")
    doc = explain_json(capsys, "default/first", write(tmp_path, NODES, gang, first, second))
    # alone, the pod fits the big node; with its gang (two 6-cpu pods, one node big enough)
    # the session places nothing: the one verdict is the session's, the table the pod's own
    assert doc["verdict"].startswith("Schedulable: Pod default/first can possibly be assigned")
    assert doc["nodes"]["big"]["fits"] is True
    assert doc["view"] == "nodes as they are before the session, the pod on its own"
