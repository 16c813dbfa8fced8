"""`caldera simulate` as users and tools call it: arguments, outputs, determinism, bad input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def pod_yaml(name: str, cpu: str = "1", *, scheduler: str = "volcano", extra: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default{extra}}}
spec:
  schedulerName: {scheduler}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def write(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text("---".join(docs))
    return str(path)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict, str]:  # type: ignore[type-arg]
    assert main(["simulate", "--output", "json", *argv]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_json_has_exactly_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    doc, _ = run_json(capsys, str(EXAMPLES))
    assert set(doc) == {"binds", "evictions", "podGroups", "queues", "pods", "unschedulable"}
    bind = doc["binds"][0]
    assert set(bind) == {"pod", "node", "cycle"}
    pg = doc["podGroups"]["research/resnet50"]
    assert set(pg) == {"phase", "running", "succeeded", "failed", "conditions"}
    assert set(doc["queues"]["research"]) == {"state", "weight", "deserved", "allocated"}


def test_the_example_cluster_binds_fitting_gangs_and_explains_the_stuck_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc, _ = run_json(capsys, "--cycles", "2", str(EXAMPLES))
    bound = {b["pod"] for b in doc["binds"]}
    assert {f"research/resnet50-{i}" for i in range(4)} <= bound
    assert {"research/llm-finetune-0", "research/llm-finetune-1"} <= bound
    assert not any(p.startswith("production/climate-sim") for p in bound)
    gpu_nodes = {b["node"] for b in doc["binds"] if b["pod"].startswith("research/llm")}
    assert gpu_nodes == {"gpu-1", "gpu-2"}
    assert doc["podGroups"]["research/resnet50"]["phase"] == "Running"
    assert doc["podGroups"]["research/resnet50"]["running"] == 4
    # Volcano's FitErrors: every node is short of cpu once the others are placed, and the
    # resource check comes first, so the cordoned and tainted nodes count under it alone
    why = doc["unschedulable"]["production/climate-sim-0"]
    assert why == "0/7 nodes are available: 1 Insufficient memory, 7 Insufficient cpu."
    cond = doc["podGroups"]["production/climate-sim"]["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("Unschedulable", "NotEnoughResources")
    assert cond["message"].startswith("6/6 tasks in gang unschedulable: pod group is not ready")


def test_output_is_byte_for_byte_reproducible() -> None:
    cmd = [
        sys.executable,
        "-m",
        "caldera",
        "simulate",
        "--cycles",
        "3",
        "--output",
        "json",
        str(EXAMPLES),
    ]
    env = {"PYTHONPATH": str(ROOT / "operator"), "PYTHONHASHSEED": "random"}
    first = subprocess.run(cmd, capture_output=True, check=True, env=env).stdout
    second = subprocess.run(cmd, capture_output=True, check=True, env=env).stdout
    assert first == second
    assert json.loads(first)["binds"]


def test_table_output_shows_binds_waiting_gangs_and_queue_shares(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", str(EXAMPLES)]) == 0
    text = capsys.readouterr().out
    assert "== cycle 1 ==" in text
    assert "bound 9 pod(s):" in text
    assert (
        "production/climate-sim" in text
        and "waiting 1 podgroup(s) (podgroups.scheduling.volcano.sh):" in text
    )
    assert "QUEUE" in text and "DESERVED" in text and "research" in text


def test_manifests_can_come_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("---".join([NODE, pod_yaml("p")])))
    doc, _ = run_json(capsys, "-")
    assert doc["binds"] == [{"pod": "default/p", "node": "n1", "cycle": 1}]


def test_only_pods_of_the_named_schedulers_are_scheduled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        NODE,
        pod_yaml("ours", scheduler="volcano"),
        pod_yaml("batch", scheduler="caldera-batch"),
        pod_yaml("theirs", scheduler="default-scheduler"),
    )
    doc, _ = run_json(capsys, path)
    assert [b["pod"] for b in doc["binds"]] == ["default/ours"]
    doc, _ = run_json(
        capsys, "--scheduler-name", "volcano", "--scheduler-name", "caldera-batch", path
    )
    assert sorted(b["pod"] for b in doc["binds"]) == ["default/batch", "default/ours"]


def test_pods_bound_in_one_cycle_run_in_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NODE, pod_yaml("p"))
    doc, _ = run_json(capsys, "--cycles", "2", path)
    assert [b["cycle"] for b in doc["binds"]] == [1]
    (pg,) = doc["podGroups"].values()
    assert (pg["phase"], pg["running"]) == ("Running", 1)
    assert doc["queues"]["default"]["allocated"] == {"cpu": "1", "memory": "0"}
    assert doc["queues"]["root"]["allocated"] == {"cpu": "1", "memory": "0"}


def test_a_malformed_object_is_reported_and_the_rest_still_schedules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NODE, pod_yaml("bad", cpu="1x"), pod_yaml("good"))
    doc, err = run_json(capsys, path)
    assert [b["pod"] for b in doc["binds"]] == ["default/good"]
    assert "Pod default/bad" in err
    assert "spec.containers[0].resources.requests" in err and "1x" in err


def test_missing_podgroup_and_missing_queue_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orphan = pod_yaml("orphan", extra=", annotations: {scheduling.k8s.io/group-name: nope}")
    lost_pg = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: lost, namespace: default}
spec: {minMember: 1, queue: no-such-queue}
"""
    lost_pod = pod_yaml("lost-0", extra=", annotations: {scheduling.k8s.io/group-name: lost}")
    path = write(tmp_path, NODE, orphan, lost_pg, lost_pod, pod_yaml("fine"))
    doc, err = run_json(capsys, path)
    assert [b["pod"] for b in doc["binds"]] == ["default/fine"]
    assert (
        "Pod default/orphan" in err
        and "PodGroup default/nope (podgroups.scheduling.volcano.sh) does not exist" in err
    )
    assert (
        "PodGroup (podgroups.scheduling.volcano.sh) "
        "default/lost: spec.queue: queue 'no-such-queue' does not exist"
    ) in err


def test_unknown_kinds_are_ignored_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = "\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"
    path = write(tmp_path, NODE, cm, pod_yaml("p"))
    doc, err = run_json(capsys, path)
    assert doc["binds"]
    assert "ConfigMap settings" in err


def test_bad_arguments_exit_with_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--cycles", "0", str(EXAMPLES)])
    assert exc.value.code == 2
    assert "--cycles" in capsys.readouterr().err


def test_a_service_in_the_manifests_spreads_the_pods_it_selects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [
        f"\napiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n"
        f"  labels: {{kubernetes.io/hostname: {n}}}\n"
        'status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}\n'
        for n in ("n1", "n2")
    ]
    # one running pod on each node, so resources tie and n1 (first by name) wins unless spreading
    running = [
        pod_yaml(f"{app}-0", scheduler="default-scheduler", extra=f", labels: {{app: {app}}}")
        + f"  nodeName: {n}\n"
        for app, n in (("web", "n1"), ("other", "n2"))
    ]
    pending = pod_yaml("web-1", extra=", labels: {app: web}")
    web = "\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\n"
    doc, _ = run_json(capsys, write(tmp_path, *nodes, *running, pending))
    assert doc["binds"] == [{"pod": "default/web-1", "node": "n1", "cycle": 1}]
    selecting = web + "spec: {selector: {app: web}}\n"
    doc, err = run_json(capsys, write(tmp_path, *nodes, *running, pending, selecting))
    assert doc["binds"] == [{"pod": "default/web-1", "node": "n2", "cycle": 1}]
    assert err == ""
    malformed = web + "spec: {selector: [app, web]}\n"
    doc, err = run_json(capsys, write(tmp_path, *nodes, *running, pending, malformed))
    assert doc["binds"] == [{"pod": "default/web-1", "node": "n1", "cycle": 1}]
    assert "Service default/web: spec.selector" in err
