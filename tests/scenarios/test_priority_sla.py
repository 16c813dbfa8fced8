"""priority and sla plugins (volcano.md §1.3, §2.1, §3.3, §3.4).

priority: jobs by their PodGroup's PriorityClass value (else the cluster's globalDefault class,
else 0), tasks by pod priority. sla: a job past its waiting time (plugin argument
``sla-waiting-time``, overridden by the PodGroup annotation ``volcano.sh/sla-waiting-time`` or
bare ``sla-waiting-time``) goes first and is permitted by ``JobEnqueueable``; in tier 1, as in
Volcano's CI config, that permit decides before overcommit in tier 2 is asked (§3.3 voting).

Simulated time is the newest creation time plus one second per cycle, so creation times are set
explicitly: the newest object is created at T0 + 600 and the session runs at T0 + 601.
"""

from __future__ import annotations

import pytest

from builders import (
    Obj,
    binds,
    default_policy_with,
    node,
    pod,
    podgroup,
    priority_class,
    scenario,
    summary,
)

T0 = 1_800_000_000.0
NOW = T0 + 601


def sla_policy(waiting_time: str | None = None, *, sla_tier: int = 1) -> str:
    """Volcano's built-in policy plus sla, with its ``sla-waiting-time`` argument if given: in
    tier 1 after conformance (as in Volcano's CI config) or in tier 2 right after overcommit."""
    after = {1: "conformance", 2: "overcommit"}[sla_tier]
    args = {"sla": {"sla-waiting-time": waiting_time}} if waiting_time else None
    return default_policy_with(add={"sla": after}, arguments=args)


def phases(objects: list[Obj], policy_yaml: str | None = None) -> dict[str, str]:
    sim = scenario(objects, policy_yaml=policy_yaml)
    return {k: v["phase"] for k, v in summary(sim)["podGroups"].items()}


# -- priority ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classes", "late_class", "expected"),
    [
        pytest.param(
            [priority_class("low", 10), priority_class("high", 1000)],
            "high",
            {"default/late-0": "n1"},
            id="the higher-priority job goes first though it is younger",
        ),
        pytest.param(
            [priority_class("low", 10), priority_class("normal", 100, default=True)],
            "",
            {"default/late-0": "n1"},
            id="a job without a class gets the globalDefault class's value",
        ),
        pytest.param(
            [priority_class("low", 10), priority_class("normal", 100)],
            "",
            {"default/early-0": "n1"},
            id="without a globalDefault class a job without a class has priority 0",
        ),
    ],
)
def test_job_priority_decides_who_gets_the_room(
    classes: list[Obj], late_class: str, expected: dict[str, str]
) -> None:
    sim = scenario(
        [
            node("n1", cpu="2"),
            *classes,
            podgroup("early", priority_class="low", created=T0),
            pod("early-0", group="early", cpu="2"),
            podgroup("late", priority_class=late_class, created=T0 + 10),
            pod("late-0", group="late", cpu="2"),
        ]
    )
    assert binds(sim) == expected


def test_enqueue_admits_the_higher_priority_job_first() -> None:
    # Room under overcommit (4 × 1.2 = 4.8 cpu) for one of the two 3-cpu minimums.
    assert phases(
        [
            node("n1", cpu="4"),
            priority_class("high", 1000),
            podgroup("early", min_resources={"cpu": "3"}, created=T0),
            podgroup("late", min_resources={"cpu": "3"}, priority_class="high", created=T0 + 10),
        ]
    ) == {"default/early": "Pending", "default/late": "Inqueue"}


@pytest.mark.parametrize(
    ("x_class", "x_priority", "expected"),
    [
        pytest.param(
            "high", None, {"default/x": "n1"}, id="a task's priority comes from its PriorityClass"
        ),
        pytest.param(
            "high", 1, {"default/y": "n1"}, id="pod spec.priority wins over its PriorityClass"
        ),
        pytest.param(
            "",
            None,
            {"default/x": "n1"},
            id="a pod with neither gets the globalDefault class's value",
        ),
    ],
)
def test_task_priority(x_class: str, x_priority: int | None, expected: dict[str, str]) -> None:
    # Room for one task of the job; x is created first but y has priority 10.
    sim = scenario(
        [
            node("n1", cpu="2"),
            priority_class("low", 10),
            priority_class("normal", 100, default=True),
            priority_class("high", 1000),
            podgroup("pg", min_member=1),
            pod("x", group="pg", cpu="2", priority_class=x_class, priority=x_priority),
            pod("y", group="pg", cpu="2", priority_class="low"),
        ]
    )
    assert binds(sim) == expected


# -- sla ---------------------------------------------------------------------------------------


def _overcommitted(waited_annotations: dict[str, str] | None = None) -> list[Obj]:
    """Two jobs whose minResources overcommit rejects; "waited" has waited 601 s, "fresh" 1 s."""
    return [
        node("n1", cpu="4"),
        podgroup(
            "waited",
            min_resources={"cpu": "100"},
            created=T0,
            annotations=waited_annotations,
        ),
        pod("w", group="waited"),
        podgroup("fresh", min_resources={"cpu": "100"}, created=T0 + 600),
        pod("f", group="fresh"),
    ]


@pytest.mark.parametrize(
    ("policy_yaml", "waited_phase"),
    [
        pytest.param(sla_policy(), "Pending", id="without a waiting time sla abstains"),
        pytest.param(
            sla_policy("5m"),
            "Inqueue",
            id="a job that waited longer than sla-waiting-time is forced through enqueue",
        ),
        pytest.param(sla_policy("1h"), "Pending", id="a job within its waiting time is not forced"),
        pytest.param(
            sla_policy("5m", sla_tier=2),
            "Pending",
            id="in overcommit's tier, sla's permit cannot outvote overcommit's reject",
        ),
    ],
)
def test_an_overdue_job_is_forced_through_enqueue(policy_yaml: str, waited_phase: str) -> None:
    sim = scenario(_overcommitted(), policy_yaml=policy_yaml)
    pgs = summary(sim)["podGroups"]
    assert (pgs["default/waited"]["phase"], pgs["default/fresh"]["phase"]) == (
        waited_phase,
        "Pending",
    )
    assert sim.cycles[0].now == NOW
    # An admitted job is then placed like any other.
    assert binds(sim) == ({"default/w": "n1"} if waited_phase == "Inqueue" else {})


@pytest.mark.parametrize(
    ("annotations", "global_wait", "phase"),
    [
        pytest.param(
            {"volcano.sh/sla-waiting-time": "1m"},
            "1h",
            "Inqueue",
            id="volcano.sh/sla-waiting-time shorter than the argument makes the job overdue",
        ),
        pytest.param(
            {"sla-waiting-time": "1m"}, "1h", "Inqueue", id="the bare annotation works too"
        ),
        pytest.param(
            {"sla-waiting-time": "1m"}, None, "Inqueue", id="the annotation needs no argument"
        ),
        pytest.param(
            {"volcano.sh/sla-waiting-time": "1h"},
            "1m",
            "Pending",
            id="an annotation longer than the argument keeps the job waiting",
        ),
        pytest.param(
            {"volcano.sh/sla-waiting-time": "1h", "sla-waiting-time": "1m"},
            "1h",
            "Pending",
            id="the volcano.sh/ annotation is read before the bare one",
        ),
        pytest.param(
            {"sla-waiting-time": "soon"},
            "1m",
            "Inqueue",
            id="an annotation that does not parse falls back to the argument",
        ),
        pytest.param(
            {"sla-waiting-time": "0s"},
            None,
            "Pending",
            id="a waiting time that is not positive counts as unset",
        ),
    ],
)
def test_the_podgroup_annotation_overrides_the_argument(
    annotations: dict[str, str], global_wait: str | None, phase: str
) -> None:
    policy_yaml = sla_policy(global_wait)
    pgs = phases(_overcommitted(annotations), policy_yaml)
    assert (pgs["default/waited"], pgs["default/fresh"]) == (phase, "Pending")


@pytest.mark.parametrize(
    ("waiting_time", "late_annotations", "winner"),
    [
        pytest.param(
            "5m",
            {},
            "default/early-0",
            id="under one waiting time the job that waited longer goes first",
        ),
        pytest.param(
            "1h",
            {"sla-waiting-time": "1m"},
            "default/late-0",
            id="the job whose waiting time runs out first goes first, though younger",
        ),
        pytest.param(
            None,
            {"volcano.sh/sla-waiting-time": "1h"},
            "default/late-0",
            id="a job with a waiting time goes before one without",
        ),
    ],
)
def test_sla_job_order(
    waiting_time: str | None, late_annotations: dict[str, str], winner: str
) -> None:
    # Room for one of the two jobs.
    sim = scenario(
        [
            node("n1", cpu="2"),
            podgroup("early", created=T0),
            pod("early-0", group="early", cpu="2"),
            podgroup("late", created=T0 + 600, annotations=late_annotations),
            pod("late-0", group="late", cpu="2"),
        ],
        policy_yaml=sla_policy(waiting_time),
    )
    assert binds(sim) == {winner: "n1"}
