"""task-topology: a job's roles placed together or apart, and in the order its PodGroup asks.

Cases follow Volcano's ``task-topology`` plugin (``buildBucket``, ``checkTaskSetAffinity``,
``taskAffinityOrder``, ``TaskOrderFn``, ``calcBucketScore``) and its ``TestTaskTopology`` tables in
spirit: a TensorFlow-style job of parameter servers (``ps``) and workers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytest

from builders import Obj, node, pod, podgroup, policy_text, scenario
from caldera.plugins.task_topology import AFFINITY, ANTI_AFFINITY, TASK_ORDER, JobManager

ROLE = "volcano.sh/task-spec"


def tf_job(annotations: Mapping[str, str], roles: Sequence[str]) -> list[Obj]:
    objs: list[Obj] = [podgroup("tf", min_member=len(roles), annotations=dict(annotations))]
    objs += [
        pod(f"tf-{role}-{i}", group="tf", cpu="1", annotations={ROLE: role})
        for i, role in enumerate(roles)
    ]
    return objs


def placements(
    annotations: Mapping[str, str], *, pack: bool, weight: int = 10
) -> list[tuple[str, str]]:
    """Where the job's pods go, in placement order, on three empty 8-cpu nodes; ``pack`` adds
    binpack (which alone puts every pod on one node)."""
    scorers = ["predicates", "nodeorder", *(["binpack"] if pack else []), "task-topology"]
    text = policy_text(
        "enqueue, allocate",
        ["priority", "gang"],
        scorers,
        arguments={"task-topology": {"task-topology.weight": weight}},
    )
    nodes = [node(f"n{i}", cpu="8", memory="32Gi") for i in range(3)]
    sim = scenario(
        [*nodes, *tf_job(annotations, ["ps", "ps", "worker", "worker"])], policy_yaml=text
    )
    return [(b.name, b.node) for b in sim.cycles[0].result.binds]


def test_self_anti_affinity_spreads_a_role_that_binpack_would_pack() -> None:
    assert {n for _, n in placements({}, pack=True)} == {"n0"}
    spread = placements({ANTI_AFFINITY: "ps"}, pack=True)
    ps_nodes = [n for name, n in spread if "-ps-" in name]
    assert len(set(ps_nodes)) == 2


def test_inter_affinity_packs_roles_that_least_requested_would_spread() -> None:
    assert len({n for _, n in placements({}, pack=False)}) == 3
    assert {n for _, n in placements({AFFINITY: "ps,worker"}, pack=False)} == {"n0"}


def test_the_task_order_annotation_places_its_roles_first() -> None:
    first = placements({AFFINITY: "ps,worker", TASK_ORDER: "worker,ps"}, pack=False)
    assert [name for name, _ in first] == ["tf-worker-2", "tf-worker-3", "tf-ps-0", "tf-ps-1"]
    default = placements({AFFINITY: "ps,worker"}, pack=False)
    assert [name for name, _ in default][:2] == ["tf-ps-0", "tf-ps-1"]


def test_a_job_naming_a_role_it_does_not_have_is_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        spread = placements({AFFINITY: "ps,chief"}, pack=False)
    assert len({n for _, n in spread}) == 3  # as without the plugin
    assert "task chief does not exist in the job" in caplog.text


@pytest.mark.parametrize(
    ("affinity", "anti", "role", "counts", "only_anti", "expected"),
    [
        pytest.param([["ps", "worker"]], [], "ps", {"worker": 2}, False, 2, id="inter affinity"),
        pytest.param([["ps"]], [], "ps", {"ps": 3}, False, 3, id="self affinity"),
        pytest.param([], [["ps"]], "ps", {"ps": 2}, False, -2, id="self anti-affinity"),
        pytest.param(
            [["ps", "worker"]],
            [["ps", "chief"]],
            "ps",
            {"worker": 1, "chief": 2},
            False,
            -1,
            id="affinity and anti-affinity add up",
        ),
        pytest.param(
            [["ps", "worker"]], [], "ps", {"worker": 2}, True, 0, id="only anti-affinity counted"
        ),
    ],
)
def test_a_role_weighs_a_set_of_roles_as_volcanos_check_task_set_affinity(
    affinity: list[list[str]],
    anti: list[list[str]],
    role: str,
    counts: dict[str, int],
    only_anti: bool,
    expected: int,
) -> None:
    manager = JobManager(affinity, anti, [])
    assert manager.affinity(role, counts, only_anti=only_anti) == expected


def test_roles_rank_by_task_order_then_by_the_kind_of_their_rules() -> None:
    # self anti-affinity (4) > inter affinity (3) > self affinity (2) > inter anti-affinity (1)
    manager = JobManager([["a", "b"], ["c"]], [["d"], ["e", "f"]], [])
    kinds = sorted("abcdef", key=lambda r: -manager.priority[r])
    assert kinds == ["d", "a", "b", "c", "e", "f"]
    ordered = JobManager([["a", "b"]], [["d"]], ["a"])
    assert ordered.rank("a", "d") == 1  # named in the task order: before any rule kind
