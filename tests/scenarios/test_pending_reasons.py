"""Every pending pod of ours is listed with the reason that names what limits it.

Nothing disappears: a pod whose PodGroup is missing, invalid or names a missing queue, and a pod
in a closed queue, each stays in the pending list with that reason, and ``caldera explain``
explains it. Messages name the limiting thing: missing pods, a closed queue, no Ready node,
resources no node has, the pods a session placed first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import Obj, node, pod, podgroup, queue, scenario, summary
from caldera.cli import main
from caldera.simulate.runner import Simulation

NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
    'status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}\n'
)
"""One 4-cpu node, as a manifest."""


def pod_manifest(name: str, metadata: str, *, cpu: str = "1") -> str:
    """Pod ``name`` in default, for volcano, asking for ``cpu``, as a manifest; ``metadata`` is
    more of its metadata in flow-style YAML."""
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, {metadata}}}\n"
        "spec: {schedulerName: volcano, containers: "
        f'[{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]}}\n'
    )


def pending(sim: Simulation) -> dict[str, str]:
    reasons: dict[str, str] = summary(sim)["unschedulable"]
    return reasons


@pytest.mark.parametrize(
    ("objs", "reason"),
    [
        pytest.param(
            [podgroup("lost", queue="nope"), pod("p", group="lost")],
            "its PodGroup default/lost (podgroups.scheduling.volcano.sh) names queue 'nope', "
            "which does not exist",
            id="its PodGroup names a queue that does not exist",
        ),
        pytest.param(
            [pod("p", group="ghost")],
            "its PodGroup default/ghost (podgroups.scheduling.volcano.sh) does not exist",
            id="its PodGroup does not exist",
        ),
        pytest.param(
            [queue("shut", state="Closed"), podgroup("g", queue="shut"), pod("p", group="g")],
            "queue shut is Closed: it takes no new pods",
            id="its queue is closed",
        ),
    ],
)
def test_a_pod_that_cannot_be_scheduled_stays_pending_with_its_reason(
    objs: list[Obj], reason: str
) -> None:
    assert pending(scenario([node("n0"), *objs])) == {"default/p": reason}


def test_a_pod_of_an_invalid_podgroup_stays_pending_naming_what_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"{NODE}---\n"
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: bad, namespace: default}\nspec: {minMember: -3}\n---\n"
        + pod_manifest("p", "annotations: {scheduling.k8s.io/group-name: bad}")
    )
    why = (
        "its PodGroup default/bad (podgroups.scheduling.volcano.sh) is invalid: spec.minMember: "
        "Input should be greater than or equal to 0"
    )
    assert main(["simulate", "--output", "json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["unschedulable"] == {"default/p": why}
    assert main(["explain", "p", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"verdict: Unschedulable: {why}" in out


def test_explain_explains_a_pod_whose_queue_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"{NODE}---\n" + pod_manifest("p", "annotations: {scheduling.volcano.sh/queue-name: nope}")
    )
    assert main(["explain", "p", str(path)]) == 0
    out = capsys.readouterr().out
    assert "names queue 'nope', which does not exist" in out
    assert "not a pending pod of this scheduler" not in out


def test_a_gang_with_fewer_pods_than_min_member_says_pods_are_missing() -> None:
    sim = scenario([node("n0"), podgroup("g", min_member=5), pod("p", group="g")])
    message = pending(sim)["default/p"]
    assert message.startswith("1/1 tasks in gang unschedulable")
    assert message.endswith(
        "(minMember is 5 but the PodGroup has 1 pod(s): waiting for 4 more to be created)"
    )


def test_with_no_ready_node_the_reason_says_so() -> None:
    sim = scenario([node("n0", ready=False), pod("p")])
    assert pending(sim) == {"default/p": "0/0 nodes are available: no node is Ready to take pods."}


def test_a_pod_asking_for_gpus_no_node_has_names_the_gpus() -> None:
    objs: list[Obj] = [node("n0", cpu="8"), pod("p", extra={"nvidia.com/gpu": "1"})]
    assert pending(scenario(objs)) == {
        "default/p": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    }


def test_explain_names_the_pods_the_session_placed_first_on_the_nodes_the_table_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    docs = [NODE]
    for name, created in (("first", "2024-01-01T00:00:00Z"), ("second", "2024-01-02T00:00:00Z")):
        docs.append(pod_manifest(name, f"creationTimestamp: '{created}'", cpu="3"))
    path.write_text("---\n".join(docs))
    assert main(["explain", "second", str(path)]) == 0
    out = capsys.readouterr().out
    assert "n0    yes" in out  # on its own it fits
    assert "verdict: Unschedulable: " in out
    assert (
        "the table is the cluster before this session; in it, 1 pod(s) placed before this one "
        "took room on the nodes it fits: default/first on n0"
    ) in out
