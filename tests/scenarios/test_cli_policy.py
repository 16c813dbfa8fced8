"""What ``caldera simulate`` and ``caldera explain`` schedule with: by default the policy
``manifests/`` installs; with ``--policy``, a policy file or a ConfigMap manifest carrying one.
And the JSON report's queues: weight, deserved share and allocation, as the table shows them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from caldera.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "examples")
CONFIGMAP = ROOT / "manifests" / "30-configmap.yaml"

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def configmap(data: str, name: str = "sched") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: ops}}\n{data}"


def explain_scores(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["explain", "--output", "json", *argv]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    scores: dict[str, Any] = doc["nodes"]["n1"]["scores"]
    assert sum(scores.values()) == doc["nodes"]["n1"]["total"]
    return scores


def test_the_default_policy_is_the_one_the_manifests_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    # the installed policy scores with binpack; Volcano's built-in default does not
    assert "binpack" in explain_scores(capsys, "p", str(cluster))
    assert "binpack" in explain_scores(capsys, "--policy", str(CONFIGMAP), "p", str(cluster))
    default = str(ROOT / "policies" / "default.yaml")
    assert "binpack" not in explain_scores(capsys, "--policy", default, "p", str(cluster))


def test_simulating_with_the_installed_configmap_is_simulating_with_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--output", "json", "--cycles", "2", EXAMPLES]) == 0
    by_default = capsys.readouterr().out
    argv = ["simulate", "--output", "json", "--cycles", "2", "--policy", str(CONFIGMAP), EXAMPLES]
    assert main(argv) == 0
    assert capsys.readouterr().out == by_default


def test_a_configmap_among_other_objects_gives_its_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = '  volcano-scheduler.conf: |\n    actions: "allocate"\n'
    path = tmp_path / "install.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n---\n"
        + configmap("data:\n  other: x\n", name="unrelated")
        + "---\n"
        + configmap("data:\n" + policy)
    )
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    # a policy without tiers has no scorer at all
    assert explain_scores(capsys, "--policy", str(path), "p", str(cluster)) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            configmap("data:\n  scheduler.conf: x\n"),
            "ConfigMap ops/sched has no data key 'volcano-scheduler.conf'",
            id="no volcano-scheduler.conf key",
        ),
        pytest.param(
            configmap('data:\n  volcano-scheduler.conf: |\n    actions: "allocate, warp"\n'),
            "ConfigMap ops/sched: data['volcano-scheduler.conf']: actions: ",
            id="an invalid policy inside",
        ),
        pytest.param(
            configmap("data:\n  volcano-scheduler.conf: [allocate]\n"),
            "ConfigMap ops/sched: data['volcano-scheduler.conf']: must be the policy as a string",
            id="not a string",
        ),
        pytest.param(
            configmap("data:\n  volcano-scheduler.conf: 'actions: allocate'\n")
            + "---\n"
            + configmap("data:\n  volcano-scheduler.conf: 'actions: allocate'\n", name="b"),
            "several ConfigMaps carry 'volcano-scheduler.conf' (ConfigMap ops/sched, "
            "ConfigMap ops/b)",
            id="two candidates",
        ),
    ],
)
def test_a_configmap_that_carries_no_usable_policy_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(text)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    for command in (["simulate"], ["explain", "p"]):
        assert main([*command, "--policy", str(path), str(cluster)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"caldera: invalid policy: {path}: {message}")
        assert err.count("\n") == 1


def table_queues(text: str) -> dict[str, tuple[str, str, str]]:
    """QUEUE → (WEIGHT, DESERVED, ALLOCATED) from the last cycle's queue table."""
    block = text.split("  queues:\n")[-1].split("\n\n")[0].splitlines()[1:]
    rows = [re.split(r"\s{2,}", line.strip()) for line in block]
    return {name: (weight, deserved, allocated) for name, weight, deserved, allocated in rows}


def as_cell(quantities: dict[str, str] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(quantities.items())) if quantities else "-"


def test_json_queues_carry_weight_deserved_and_allocated_as_the_table_shows_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--cycles", "2", EXAMPLES]) == 0
    table = table_queues(capsys.readouterr().out)
    assert main(["simulate", "--cycles", "2", "--output", "json", EXAMPLES]) == 0
    queues = json.loads(capsys.readouterr().out)["queues"]
    assert set(table) == set(queues)
    for name, (weight, deserved, allocated) in table.items():
        doc = queues[name]
        assert (str(doc["weight"]), as_cell(doc["deserved"]), as_cell(doc["allocated"])) == (
            weight,
            deserved,
            allocated,
        ), name
    research = queues["research"]
    assert research["weight"] == 3
    assert research["deserved"]["nvidia.com/gpu"] == "8"
    assert queues["production"]["allocated"] == {"cpu": "0", "memory": "0"}
    assert queues["root"]["deserved"] is None
