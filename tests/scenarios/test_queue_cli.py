"""`caldera queue list` and `caldera queue get` on manifests: vcctl's queue view (its
``ListQueue``/``GetQueue``, PodGroups counted as ``StatPodGroupCountsForQueue`` counts them), the
three resource columns Caldera adds, the tree of ``spec.parent`` in ``get``, the three output
formats, and the one-line errors with exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.cli import main

VOLCANO = "scheduling.volcano.sh/v1beta1"


def queue(name: str, state: str = "Open", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": VOLCANO,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
        "status": {"state": state},
    }


def podgroup(name: str, queue: str | None, phase: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1}
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": VOLCANO,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
        "status": {"phase": phase} if phase is not None else {},
    }


def write(tmp_path: Path, *objects: Mapping[str, Any]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["queue", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def a_team_with_two_groups(tmp_path: Path) -> str:
    """root; research (weight 4, a share and a cap, 6 cpu allocated) with two PodGroups; under
    it nlp, closing, and under nlp tiny; default, empty."""
    allocated = {"cpu": "6", "memory": "12Gi", "nvidia.com/gpu": "2"}
    research = queue(
        "research",
        weight=4,
        parent="root",
        deserved={"memory": "16Gi", "cpu": "8"},
        capability={"cpu": "12", "memory": "32Gi", "nvidia.com/gpu": "4"},
    )
    research["status"]["allocated"] = allocated
    return write(
        tmp_path,
        queue("root"),
        queue("default"),
        research,
        queue("nlp", "Closing", parent="research"),
        queue("tiny", parent="nlp", capability={"cpu": "500m"}),
        podgroup("train", "research", "Running"),
        podgroup("eval", "research", "Pending"),
    )


LIST_TABLE = """\
Name                     Weight  State   Parent   Inqueue Pending Running Unknown Completed \
Allocated                          Deserved          Capability
default                  1       Open    -        0       0       0       0       0         \
-                                  -                 -
nlp                      1       Closing research 0       0       0       0       0         \
-                                  -                 -
research                 4       Open    root     0       1       1       0       0         \
cpu=6,memory=12Gi,nvidia.com/gpu=2 cpu=8,memory=16Gi cpu=12,memory=32Gi,nvidia.com/gpu=4
root                     1       Open    -        0       0       0       0       0         \
-                                  -                 -
tiny                     1       Open    nlp      0       0       0       0       0         \
-                                  -                 cpu=500m
"""


def test_queue_list_is_vcctls_table_with_allocated_deserved_and_capability_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "list", a_team_with_two_groups(tmp_path))
    assert (code, err) == (0, "")
    assert out == LIST_TABLE


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        pytest.param([], [0, 0, 0, 0, 0], id="no PodGroups"),
        pytest.param(
            ["Inqueue", "Pending", "Pending", "Running", "Unknown", "Completed", "Completed"],
            [1, 2, 1, 1, 2],
            id="one column per phase",
        ),
        pytest.param([None, ""], [0, 0, 0, 0, 0], id="no phase yet counts nowhere, as in vcctl"),
    ],
)
def test_queue_list_counts_a_queues_podgroups_by_phase_as_vcctl_ListQueue_does(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    groups: list[str | None],
    expected: list[int],
) -> None:
    pgs = [podgroup(f"pg{i}", "research", phase) for i, phase in enumerate(groups)]
    others = [podgroup("elsewhere", "default", "Running")]
    path = write(tmp_path, queue("default"), queue("research"), *pgs, *others)
    code, out, _ = run(capsys, "list", path, "--output", "json")
    assert code == 0
    row = next(r for r in json.loads(out) if r["name"] == "research")
    order = ["inqueue", "pending", "running", "unknown", "completed"]
    assert [row["podGroups"][p] for p in order] == expected


@pytest.mark.parametrize(
    ("argv", "counted_in"),
    [
        pytest.param([], "default", id="the default queue"),
        pytest.param(["--default-queue", "batch"], "batch", id="--default-queue"),
    ],
)
def test_a_podgroup_naming_no_queue_counts_where_the_scheduler_puts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], counted_in: str
) -> None:
    path = write(tmp_path, queue("default"), queue("batch"), podgroup("lone", None, "Running"))
    code, out, _ = run(capsys, "list", path, "--output", "json", *argv)
    assert code == 0
    running = {r["name"]: r["podGroups"]["running"] for r in json.loads(out)}
    assert running == {"batch": 0, "default": 0} | {counted_in: 1}


LOADERS: dict[str, Callable[[str], Any]] = {"json": json.loads, "yaml": yaml.safe_load}


@pytest.mark.parametrize("output", sorted(LOADERS))
def test_queue_list_json_and_yaml_parse_back_to_the_same_queues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    code, out, _ = run(capsys, "list", a_team_with_two_groups(tmp_path), "--output", output)
    assert code == 0
    rows = {r["name"]: r for r in LOADERS[output](out)}
    assert sorted(rows) == ["default", "nlp", "research", "root", "tiny"]
    assert rows["research"] == {
        "name": "research",
        "weight": 4,
        "state": "Open",
        "parent": "root",
        "podGroups": {"inqueue": 0, "pending": 1, "running": 1, "unknown": 0, "completed": 0},
        "allocated": {"cpu": "6", "memory": "12Gi", "nvidia.com/gpu": "2"},
        "deserved": {"cpu": "8", "memory": "16Gi"},
        "capability": {"cpu": "12", "memory": "32Gi", "nvidia.com/gpu": "4"},
    }
    # no share and no cap are nothing, not zero
    assert (rows["nlp"]["deserved"], rows["nlp"]["capability"]) == (None, None)
    assert rows["nlp"]["allocated"] == {}


GET_TABLE = """\
Name                     Weight  State   Parent   Inqueue Pending Running Unknown Completed \
Allocated                          Deserved          Capability
research                 4       Open    root     0       1       1       0       0         \
cpu=6,memory=12Gi,nvidia.com/gpu=2 cpu=8,memory=16Gi cpu=12,memory=32Gi,nvidia.com/gpu=4
  nlp                    1       Closing research 0       0       0       0       0         \
-                                  -                 -
    tiny                 1       Open    nlp      0       0       0       0       0         \
-                                  -                 cpu=500m
"""


def test_queue_get_shows_the_queue_and_the_queues_under_it_indented_by_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "get", "research", a_team_with_two_groups(tmp_path))
    assert (code, err) == (0, "")
    assert out == GET_TABLE


@pytest.mark.parametrize("output", sorted(LOADERS))
def test_queue_get_nests_the_child_queues_in_json_and_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    code, out, _ = run(capsys, "get", "research", a_team_with_two_groups(tmp_path), "-o", output)
    assert code == 0
    doc = LOADERS[output](out)

    def names(node: dict[str, Any]) -> list[Any]:
        return [node["name"], [names(c) for c in node["children"]]]

    assert names(doc) == ["research", [["nlp", [["tiny", []]]]]]
    assert doc["podGroups"]["running"] == 1


def test_a_queue_without_a_parent_is_under_root_as_the_queue_controller_defaults_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, queue("root"), queue("default"), queue("b", parent="root"))
    code, out, _ = run(capsys, "get", "root", path, "--output", "json")
    assert code == 0
    doc = json.loads(out)
    assert [c["name"] for c in doc["children"]] == ["b", "default"]
    assert doc["children"][1]["parent"] == ""  # shown as written


def test_a_parent_cycle_is_shown_once_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, queue("a", parent="b"), queue("b", parent="a"))
    code, out, _ = run(capsys, "get", "a", path)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["a", "b"]


def test_queue_list_of_manifests_without_queues_says_so_as_vcctl_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "list", write(tmp_path, podgroup("pg", "x", "Running")))
    assert (code, out) == (0, "No resources found\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["get", "nope"], "queue nope not found in the manifests", id="unknown queue"),
        pytest.param(
            ["close", "research"],
            "queue close changes a cluster: give --kubeconfig (and --context), not manifests",
            id="close on manifests",
        ),
        pytest.param(
            ["open", "research"],
            "queue open changes a cluster: give --kubeconfig (and --context), not manifests",
            id="open on manifests",
        ),
        pytest.param(
            ["list", "--kubeconfig", "kubeconfig"],
            "queue list: give MANIFEST files or --kubeconfig, not both",
            id="both inputs",
        ),
    ],
)
def test_what_the_queue_command_cannot_do_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    path = a_team_with_two_groups(tmp_path)
    code, out, err = run(capsys, *argv, path)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"caldera: {message}"]


@pytest.mark.parametrize("verb", ["list", "get x", "open x", "close x"])
def test_the_queue_commands_without_manifests_or_a_cluster_are_exit_2(
    capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    code, out, err = run(capsys, *verb.split())
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert "--kubeconfig" in err


def test_a_manifest_path_that_does_not_exist_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "list", str(tmp_path / "typo.yaml"))
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "typo.yaml" in err


def test_a_kubeconfig_that_does_not_exist_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nowhere")
    for argv in (["list"], ["close", "research"]):
        code, out, err = run(capsys, *argv, "--kubeconfig", missing)
        assert (code, out) == (2, "")
        assert err.splitlines() == [
            f"caldera: kubeconfig {missing} does not exist (and this is not a pod in a cluster)"
        ]


EXAMPLE_LIST = """\
Name                     Weight  State   Parent   Inqueue Pending Running Unknown Completed \
Allocated          Deserved           Capability
default                  1       Open    root     0       0       0       0       0         \
-                  -                  -
nlp                      1       Closing research 0       0       1       0       0         \
cpu=2,memory=8Gi   -                  cpu=4
production               2       Open    root     0       0       1       0       1         \
cpu=4,memory=16Gi  cpu=8,memory=32Gi  -
research                 3       Open    root     1       1       1       0       0         \
cpu=10,memory=40Gi cpu=12,memory=48Gi cpu=16,memory=64Gi
root                     1       Open    -        0       0       0       0       0         \
cpu=14,memory=56Gi -                  -
"""
EXAMPLE_GET = """\
Name                     Weight  State   Parent   Inqueue Pending Running Unknown Completed \
Allocated          Deserved           Capability
research                 3       Open    root     1       1       1       0       0         \
cpu=10,memory=40Gi cpu=12,memory=48Gi cpu=16,memory=64Gi
  nlp                    1       Closing research 0       0       1       0       0         \
cpu=2,memory=8Gi   -                  cpu=4
"""


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        pytest.param(["list", "examples/queues/"], EXAMPLE_LIST, id="list"),
        pytest.param(["get", "research", "examples/queues/cluster.yaml"], EXAMPLE_GET, id="get"),
    ],
)
def test_the_queue_example_prints_what_the_documentation_shows(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    shown: str,
) -> None:
    """``examples/queues/``, as the user documentation runs it (from the repository root)."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    assert out == shown
