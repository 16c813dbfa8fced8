"""drf: jobs ordered by dominant share, kept current within the session, and its victim rule.

A job's share is max over resources of allocated / cluster total (pods are not a resource here).
"""

from __future__ import annotations

import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, scenario
from caldera.api.task import Task, TaskStatus
from caldera.framework.session import Session

DRF = """\
actions: "allocate"
tiers:
- plugins:
  - name: drf
  - name: predicates
"""

NO_JOB_ORDER = """\
actions: "allocate"
tiers:
- plugins:
  - name: predicates
"""


def drf_shares(ssn: Session) -> dict[str, float]:
    plugin = next(p for p in ssn.plugins if p.name == "drf")
    out: dict[str, float] = plugin.shares  # type: ignore[attr-defined]
    return out


def running_job(name: str, *pods: tuple[str | None, str | None], created: float) -> list[Obj]:
    """A job with one running pod per (cpu, memory)."""
    objs: list[Obj] = [podgroup(name, phase="Running", created=created)]
    objs += [
        pod(f"{name}-{i}", group=name, cpu=c, memory=m, node_name="n1", created=created)
        for i, (c, m) in enumerate(pods)
    ]
    return objs


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param(
            {"x": [("1", "4Gi")], "y": [("3", "1Gi")], "z": []},
            # x: max(1/10, 4/10) = 0.4; y: max(3/10, 1/10) = 0.3; z: 0
            ["z", "y", "x"],
            id="smaller dominant share first, whichever resource dominates",
        ),
        pytest.param(
            {"x": [("2", None)], "y": [(None, "2Gi")]},
            ["x", "y"],
            id="equal shares in different resources fall back to creation order",
        ),
        pytest.param(
            {"x": [("1", None), ("1", None), ("1", None)], "y": [("2", "2Gi")]},
            ["y", "x"],
            id="a job's share sums all its allocated tasks",
        ),
    ],
)
def test_job_order_by_dominant_share(
    jobs: dict[str, list[tuple[str | None, str | None]]], expected: list[str]
) -> None:
    objs: list[Obj] = [node("n1", cpu="10", memory="10Gi")]
    for i, (name, pods) in enumerate(jobs.items()):
        objs += running_job(name, *pods, created=1e9 + i)
        objs.append(pod(f"{name}-wait", group=name, created=1e9 + i))
    ssn = open_session(objs, DRF)
    ordered = sorted(ssn.jobs.values(), key=ssn.job_order_key())
    assert [j.name for j in ordered] == expected


@pytest.mark.parametrize(
    ("policy_yaml", "expected"),
    [
        pytest.param(
            DRF,
            ["a-0", "b-0", "a-1", "b-1", "a-2", "b-2"],
            id="with drf two equal jobs alternate as each allocation raises its share",
        ),
        pytest.param(
            NO_JOB_ORDER,
            ["a-0", "a-1", "a-2", "b-0", "b-1", "b-2"],
            id="without drf the older job keeps going first",
        ),
    ],
)
def test_shares_follow_allocations_within_the_session(
    policy_yaml: str, expected: list[str]
) -> None:
    objs: list[Obj] = [node("n1", cpu="10", memory="10Gi")]
    for i, name in enumerate(("a", "b")):
        objs.append(podgroup(name, created=1e9 + i))
        objs += [pod(f"{name}-{k}", group=name, created=1e9 + i) for k in range(3)]
    sim = scenario(objs, policy_yaml=policy_yaml)
    order = [b.name for b in sim.cycles[0].result.binds]
    assert order == expected
    assert len(binds(sim)) == 6


def test_share_counts_pipelined_tasks_and_drops_them_when_unplaced() -> None:
    """Volcano's drf AllocateFunc fires for pipelined tasks too."""
    ssn = open_session(
        [
            node("n1", cpu="10", memory="10Gi"),
            podgroup("j"),
            pod("j-0", group="j", cpu="2", memory="1Gi"),
            pod("j-1", group="j", cpu="1", memory="4Gi"),
        ],
        DRF,
    )
    tasks = {t.name: t for t in ssn.jobs["default/j"].tasks.values()}
    assert drf_shares(ssn)["default/j"] == 0.0
    ssn.place(tasks["j-0"], 0, TaskStatus.PIPELINED)
    assert drf_shares(ssn)["default/j"] == pytest.approx(0.2)
    ssn.place(tasks["j-1"], 0, TaskStatus.ALLOCATED)
    assert drf_shares(ssn)["default/j"] == pytest.approx(0.5)  # memory 5Gi of 10Gi dominates
    ssn.unplace(tasks["j-1"])
    ssn.unplace(tasks["j-0"])
    assert drf_shares(ssn)["default/j"] == 0.0


# -- the preemptable rule --------------------------------------------------------------------


def _victims(
    *,
    node_cpu: str,
    preemptor_cpu: str,
    preemptor_running: str | None,
    victim_pods: list[str],
    preemptees: list[int],
) -> list[str]:
    objs: list[Obj] = [
        node("n1", cpu=node_cpu, memory="100Gi"),
        podgroup("p", created=1e9),
        pod("p-wait", group="p", cpu=preemptor_cpu, memory=None, created=1e9),
        podgroup("v", phase="Running", created=1e9 + 1),
    ]
    if preemptor_running is not None:
        objs.append(pod("p-run", group="p", cpu=preemptor_running, memory=None, node_name="n1"))
    objs += [
        pod(f"v{i}", group="v", cpu=c, memory=None, node_name="n1")
        for i, c in enumerate(victim_pods)
    ]
    ssn = open_session(objs, DRF)
    preemptor = next(t for t in ssn.jobs["default/p"].tasks.values() if t.name == "p-wait")
    by_name: dict[str, Task] = {t.name: t for t in ssn.jobs["default/v"].tasks.values()}
    # drf is the only voter: no victim means no tier decides (None)
    chosen = ssn.preemptable(preemptor, [by_name[f"v{i}"] for i in preemptees])
    return [] if chosen is None else [t.name for t in chosen]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            # preemptor share (2+1)/10 = 0.3; victim job 5 cpu − 1 = 0.4 > 0.3
            {"victim_pods": ["1", "4"], "preemptees": [0]},
            ["v0"],
            id="a victim job left with a larger share than the preemptor's is preemptable",
        ),
        pytest.param(
            # victim 5 − 2 = 0.3 == 0.3
            {"victim_pods": ["2", "3"], "preemptees": [0]},
            ["v0"],
            id="a victim job left with an equal share is preemptable",
        ),
        pytest.param(
            # victim 5 − 3 = 0.2 < 0.3
            {"victim_pods": ["3", "2"], "preemptees": [0]},
            [],
            id="a victim job left with a smaller share is not preemptable",
        ),
        pytest.param(
            # victim 4: −1 → 0.3 (victim), −1 more → 0.2 (not)
            {"victim_pods": ["1", "1", "2"], "preemptees": [0, 1]},
            ["v0"],
            id="removals from one victim job accumulate",
        ),
        pytest.param(
            # victim 6: −4 → 0.2 (not a victim, but still taken off), −1 more → 0.1 (not);
            # taken alone the second would leave 0.5 and be a victim
            {"victim_pods": ["4", "1", "1"], "preemptees": [0, 1]},
            [],
            id="a rejected candidate's resources are still taken off its job",
        ),
    ],
)
def test_preemptable_compares_shares_after_removal(
    case: dict[str, list[str]], expected: list[str]
) -> None:
    victims = _victims(node_cpu="10", preemptor_cpu="1", preemptor_running="2", **case)  # type: ignore[arg-type]
    assert victims == expected


@pytest.mark.parametrize(
    ("preemptor_cpu", "expected"),
    [
        pytest.param(
            "1001m", ["v0"], id="a preemptor share higher by at most 1e-6 still counts as equal"
        ),
        pytest.param("1003m", [], id="a preemptor share higher by more than 1e-6 does not"),
    ],
)
def test_preemptable_share_delta(preemptor_cpu: str, expected: list[str]) -> None:
    # 2000 cores: the victim keeps 1000m (share 5e-4); the preemptor would hold 1001m
    # (5.005e-4, 5e-7 above) or 1003m (1.5e-6 above)
    victims = _victims(
        node_cpu="2000",
        preemptor_cpu=preemptor_cpu,
        preemptor_running=None,
        victim_pods=["1", "1"],
        preemptees=[0],
    )
    assert victims == expected
