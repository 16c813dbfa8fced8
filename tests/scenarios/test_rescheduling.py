"""rescheduling (lowNodeUtilization) with the shuffle action: pods leave crowded nodes while
others sit nearly idle, within the room the idle ones have, once per interval.

Cases follow Volcano's ``victimsFnForLnu``, ``groupNodesByUtilization``,
``evictPodsFromSourceNodes``, ``sortPods`` and ``evict`` (``pkg/scheduler/plugins/rescheduling``)
in spirit, with utilization measured on requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from builders import Obj, node, pod, podgroup, policy_text, priority_class, state_of
from caldera.errors import ConfigError
from caldera.framework.policy import load_policy
from caldera.framework.registry import Registry
from caldera.simulate.runner import Simulation, simulate

T0 = 1_800_000_000.0


def lnu(
    thresholds: Mapping[str, int],
    targets: Mapping[str, int],
    *,
    interval: str = "5m",
    **extra: Any,
) -> str:
    params = {"thresholds": dict(thresholds), "targetThresholds": dict(targets), **extra}
    arguments = {
        "interval": interval,
        "strategies": [{"name": "lowNodeUtilization", "parameters": params}],
    }
    return policy_text(
        "enqueue, allocate, shuffle",
        ["priority", "gang", "rescheduling"],
        ["predicates"],
        arguments={"rescheduling": arguments},
    )


LOW = {"cpu": 20, "memory": 20, "pods": 20}
HIGH = {"cpu": 50, "memory": 50, "pods": 50}


def cluster(busy_pods: Sequence[Obj], idle_nodes: int = 2) -> list[Obj]:
    out: list[Obj] = [node("busy", cpu="10", memory="100Gi")]
    out += [node(f"idle-{i}", cpu="10", memory="100Gi") for i in range(idle_nodes)]
    return [*out, *busy_pods]


def running(name: str, cpu: str | None = "1", **kwargs: Any) -> list[Obj]:
    return [
        podgroup(f"pg-{name}", created=T0 - 60),
        pod(
            name,
            group=f"pg-{name}",
            cpu=cpu,
            memory="100Mi",
            node_name="busy",
            phase="Running",
            created=T0 - 60,
            **kwargs,
        ),
    ]


def run(objs: Sequence[Obj], text: str, cycles: int = 1) -> Simulation:
    state = state_of([*objs, podgroup("clock", created=T0)])
    reg = Registry.from_entry_points()
    return simulate(
        state,
        load_policy(text, reg, strict=True),
        reg,
        scheduler_names=["volcano"],
        cycles=cycles,
        period=60.0,
    )


def evicted(sim: Simulation) -> list[list[str]]:
    return [sorted(e.name for e in c.result.evictions) for c in sim.cycles]


def test_a_crowded_node_sheds_pods_until_it_is_under_its_target() -> None:
    # busy: 8 of 10 cpu (80%), the idle nodes 0%: evict until busy is at 50%, lowest first
    pods = [p for i in range(8) for p in running(f"p{i}")]
    sim = run(cluster(pods), lnu(LOW, HIGH))
    assert evicted(sim) == [["p0", "p1", "p2"]]
    assert {e.reason for e in sim.cycles[0].result.evictions} == {"shuffle"}


def test_pods_go_in_order_of_priority_then_qos() -> None:
    guaranteed = {"cpu": "1", "memory": "100Mi"}
    objs = [
        priority_class("high", 100),
        *running("high-prio", priority_class="high"),
        *running("a-guaranteed", limits=guaranteed),
        *running("b-burstable"),
        *running("c-best-effort", cpu=None),
        *(p for i in range(5) for p in running(f"filler{i}", priority_class="high")),
    ]
    sim = run(cluster(objs), lnu(LOW, {"cpu": 60, "memory": 50, "pods": 50}))
    # 8 cpu requested (80%): down to 60% takes three pods (the BestEffort one frees no cpu),
    # those without a priority first and, among them, BestEffort, Burstable, then Guaranteed
    assert evicted(sim) == [["a-guaranteed", "b-burstable", "c-best-effort"]]


def test_the_room_on_low_nodes_caps_what_moves_per_interval() -> None:
    # targets of 10%: two idle nodes have room for 2 cpu; busy stays crowded, so each run moves
    # two more pods, once per 3-minute interval (cycles a minute apart, the first at +1 min)
    pods = [p for i in range(8) for p in running(f"p{i}")]
    text = lnu(LOW, {"cpu": 10, "memory": 50, "pods": 50}, interval="3m")
    sim = run(cluster(pods), text, cycles=7)
    assert evicted(sim) == [["p0", "p1"], [], [], ["p2", "p3"], [], [], ["p4", "p5"]]


def test_pods_at_or_above_the_threshold_priority_class_stay() -> None:
    objs = [
        priority_class("critical", 1000),
        *(p for i in range(8) for p in running(f"c{i}", priority_class="critical")),
    ]
    text = lnu(LOW, HIGH, thresholdPriorityClassName="critical")
    assert evicted(run(cluster(objs), text)) == [[]]


@pytest.mark.parametrize(
    ("busy_pods", "idle_nodes"),
    [
        pytest.param(8, 0, id="no node is low: nowhere to go"),
        pytest.param(1, 2, id="every node is low: nothing to balance"),
        pytest.param(4, 2, id="no node is over its target"),
    ],
)
def test_nothing_moves_without_both_low_and_crowded_nodes(busy_pods: int, idle_nodes: int) -> None:
    pods = [p for i in range(busy_pods) for p in running(f"p{i}")]
    thresholds = {"cpu": 20, "memory": 20, "pods": 20}
    assert evicted(run(cluster(pods, idle_nodes), lnu(thresholds, HIGH))) == [[]]


def test_the_default_thresholds_move_nothing() -> None:
    # Volcano's defaults (100% everywhere) make every node low
    text = policy_text(
        "enqueue, allocate, shuffle", ["priority", "gang", "rescheduling"], ["predicates"]
    )
    pods = [p for i in range(10) for p in running(f"p{i}")]
    assert evicted(run(cluster(pods), text)) == [[]]


def test_a_strategy_caldera_does_not_have_is_a_warning_and_strict_refuses_it() -> None:
    arguments = {
        "strategies": [
            {"name": "offlineOnly"},
            {"name": "lowNodeUtilization", "params": {"thresholds": {"cpu": 10}}},
        ]
    }
    text = policy_text("shuffle", ["rescheduling"], arguments={"rescheduling": arguments})
    reg = Registry.from_entry_points()
    policy = load_policy(text, reg)
    key = "tiers[0].plugins[0].arguments['strategies'][0]['name']"
    assert [w.key for w in policy.warnings] == [key]
    option = policy.option("rescheduling")
    assert option is not None
    assert option.args.low_node_utilization.thresholds.cpu == 10  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as caught:
        load_policy(text, reg, strict=True)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        pytest.param({"interval": "often"}, "['interval']", id="an interval that is no duration"),
        pytest.param(
            {
                "strategies": [
                    {"name": "lowNodeUtilization", "parameters": {"thresholds": {"cpu": 120}}}
                ]
            },
            "['strategies'][0]['parameters']['thresholds']['cpu']",
            id="a threshold over 100%",
        ),
    ],
)
def test_bad_rescheduling_arguments_name_the_key(arguments: dict[str, Any], key: str) -> None:
    text = policy_text("shuffle", ["rescheduling"], arguments={"rescheduling": arguments})
    with pytest.raises(ConfigError) as caught:
        load_policy(text, Registry.from_entry_points())
    assert caught.value.key == f"tiers[0].plugins[0].arguments{key}"
