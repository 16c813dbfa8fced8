"""tdm and shuffle: revocable nodes open to preemptable work in their time window, and emptied
by the shuffle action once it closes.

Cases follow Volcano's ``tdm`` plugin (``pkg/scheduler/plugins/tdm/tdm.go``: ``predicateFn``,
``nodeOrderFn``, ``victimsFn``, ``maxVictims``, ``getMaxPodEvictNum``) and ``TestTDM`` in spirit.
The clock is the session's: every test runs in UTC, at times built from the same constants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from builders import (
    REGISTRY,
    Obj,
    node,
    node_scores,
    node_verdicts,
    pod,
    podgroup,
    policy,
    policy_text,
    snapshot_of,
    state_of,
)
from caldera.errors import ConfigError
from caldera.framework.policy import load_policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session
from caldera.models.policy import PodDisruptionBudget
from caldera.simulate.runner import Simulation, simulate

NOON = datetime(2027, 3, 1, 12, 0, tzinfo=UTC).timestamp()
ZONE = "volcano.sh/revocable-zone"


pytestmark = pytest.mark.usefixtures("utc")


def tdm_policy(actions: str = "allocate", **arguments: str) -> str:
    return policy_text(
        actions, ["priority", "gang"], ["predicates", "tdm"], arguments={"tdm": arguments}
    )


def nodes() -> list[Obj]:
    return [
        node("ordinary", cpu="8", memory="16Gi"),
        node("revocable", cpu="8", memory="16Gi", labels={ZONE: "rz1"}),
    ]


def at_noon(objs: Sequence[Obj], text: str) -> Session:
    """A session opened at noon."""
    pol = policy(text)
    ssn = Session(snapshot_of(objs, now=NOON, managed=pol.managed_resources), pol, REGISTRY)
    ssn.open()
    return ssn


def two_pods() -> list[Obj]:
    return [
        podgroup("pg", min_member=1),
        pod("plain", group="pg", cpu="1"),
        pod("borrower", group="pg", cpu="1", annotations={ZONE: "*"}),
    ]


@pytest.mark.parametrize(
    ("arguments", "plain", "borrower"),
    [
        pytest.param(
            {"tdm.revocable-zone.rz1": "11:00-13:00"},
            "plugin tdm predicates task default/plain is not allow to dispatch to revocable node",
            "",
            id="inside the window only pods allowed on revocable nodes go there",
        ),
        pytest.param(
            {"tdm.revocable-zone.rz1": "13:00-14:00"},
            "plugin tdm predicates current time beyond revocable zone rz1:13:00-14:00",
            "plugin tdm predicates current time beyond revocable zone rz1:13:00-14:00",
            id="outside the window no pod goes there",
        ),
        pytest.param(
            {"tdm.revocable-zone.rz1": "12:00-12:00"},
            "plugin tdm predicates task default/plain is not allow to dispatch to revocable node",
            "",
            id="a start equal to the end runs to the same time the next day",
        ),
        pytest.param(
            {"tdm.revocable-zone.rz1": "23:00-13:00"},
            "plugin tdm predicates current time beyond revocable zone rz1:23:00-13:00",
            "plugin tdm predicates current time beyond revocable zone rz1:23:00-13:00",
            id="an overnight window starts today, as Volcano places it: noon is outside",
        ),
        pytest.param(
            {},
            "plugin tdm predicates revocable zone rz1 not support",
            "plugin tdm predicates revocable zone rz1 not support",
            id="a zone without a window takes no pod",
        ),
    ],
)
def test_revocable_nodes_take_only_allowed_pods_inside_their_window(
    arguments: Mapping[str, str], plain: str, borrower: str
) -> None:
    ssn = at_noon([*nodes(), *two_pods()], tdm_policy(**arguments))
    assert node_verdicts(ssn, "plain") == {"ordinary": "", "revocable": plain}
    assert node_verdicts(ssn, "borrower") == {"ordinary": "", "revocable": borrower}


def test_an_open_revocable_node_scores_100_for_a_pod_allowed_there() -> None:
    ssn = at_noon([*nodes(), *two_pods()], tdm_policy(**{"tdm.revocable-zone.rz1": "11:00-13:00"}))
    borrower = node_scores(ssn, "borrower")
    assert borrower["revocable"] - borrower["ordinary"] == 100.0


@pytest.mark.parametrize(
    ("arguments", "key", "says"),
    [
        pytest.param(
            {"tdm.revocable-zone.rz1": "25:00-26:00"},
            "tiers[1].plugins[1].arguments",
            "tdm.revocable-zone.rz1: '25:00' is not a time of day (HH:MM)",
            id="an hour past 23",
        ),
        pytest.param(
            {"tdm.revocable-zone.rz1": "10:00"},
            "tiers[1].plugins[1].arguments",
            "tdm.revocable-zone.rz1: revocable zone 10:00 format error",
            id="a window without an end",
        ),
        pytest.param(
            {"tdm.evict.period": "soon"},
            "tiers[1].plugins[1].arguments['tdm.evict.period']",
            "invalid duration",
            id="a period that is not a duration",
        ),
    ],
)
def test_bad_tdm_arguments_are_refused_naming_the_key(
    arguments: Mapping[str, str], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy(tdm_policy(**arguments), Registry.from_entry_points())
    assert caught.value.key.startswith(key)
    assert says in str(caught.value)


# -- shuffle: evicting from closed zones, within budgets, once per period ---------------------


def borrowed(running: int, budget: Mapping[str, str] | None = None) -> list[Obj]:
    """A preemptable job with ``running`` pods on the revocable node."""
    out: list[Obj] = [
        podgroup(
            "spot",
            min_member=1,
            created=NOON - 3600,
            annotations={"volcano.sh/preemptable": "true", **(budget or {})},
        )
    ]
    out.extend(
        pod(
            f"spot-{i}",
            group="spot",
            cpu="1",
            node_name="revocable",
            phase="Running",
            annotations={ZONE: "*"},
            created=NOON - 3600,
        )
        for i in range(running)
    )
    return out


def run(
    objs: Sequence[Obj], text: str, cycles: int, *, registry: Registry | None = None
) -> Simulation:
    """``cycles`` sessions a minute apart, the first at 12:01."""
    state = state_of([*objs, podgroup("clock", created=NOON)])
    reg = registry or Registry.from_entry_points()
    return simulate(
        state, load_policy(text, reg), reg, scheduler_names=["volcano"], cycles=cycles, period=60.0
    )


def evicted_per_cycle(sim: Simulation) -> list[list[str]]:
    return [sorted(e.name for e in c.result.evictions) for c in sim.cycles]


SHUFFLE = {"tdm.revocable-zone.rz1": "11:00-12:01", "tdm.evict.period": "1m"}


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        pytest.param(
            {}, [[], ["spot-0"], ["spot-1"], ["spot-2"], []], id="no budget: one pod per period"
        ),
        pytest.param(
            {"volcano.sh/jdb-min-available": "1"},
            [[], ["spot-0", "spot-1"], [], [], []],
            id="jdb-min-available: all but that many go at once",
        ),
        pytest.param(
            {"volcano.sh/jdb-max-unavailable": "66%"},
            [[], ["spot-0", "spot-1"], ["spot-2"], [], []],
            id="jdb-max-unavailable: a percentage of the tasks there are, rounded up",
        ),
    ],
)
def test_shuffle_empties_a_closed_zone_within_the_jobs_budget(
    budget: Mapping[str, str], expected: list[list[str]]
) -> None:
    # cycle n runs at noon + n minutes: 12:01 is inside the window (its end is inclusive),
    # 12:02 on outside
    sim = run(
        [*nodes(), *borrowed(3, budget)], tdm_policy("enqueue, allocate, shuffle", **SHUFFLE), 5
    )
    assert evicted_per_cycle(sim) == expected
    assert {e.reason for c in sim.cycles for e in c.result.evictions} <= {"shuffle"}


def test_shuffle_evicts_at_most_once_per_evict_period() -> None:
    arguments = {**SHUFFLE, "tdm.evict.period": "3m"}
    sim = run([*nodes(), *borrowed(3)], tdm_policy("enqueue, allocate, shuffle", **arguments), 7)
    # outside from 12:02; the first try (12:01) starts the period, so 12:04 and 12:07 evict
    assert evicted_per_cycle(sim) == [[], [], [], ["spot-0"], [], [], ["spot-1"]]


def test_a_pod_not_marked_preemptable_is_not_shuffled() -> None:
    objs = [*nodes(), *borrowed(1)]
    objs[-1] = pod(
        "spot-0",
        group="spot",
        cpu="1",
        node_name="revocable",
        phase="Running",
        annotations={ZONE: "*", "volcano.sh/preemptable": "false"},
    )
    sim = run(objs, tdm_policy("enqueue, allocate, shuffle", **SHUFFLE), 4)
    assert evicted_per_cycle(sim) == [[], [], [], []]


def test_a_disruption_budget_guards_the_shuffle() -> None:
    budget = PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": "keep", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "spot"}}, "minAvailable": 3},
            "status": {"disruptionsAllowed": 0},
        }
    )
    objs: list[Any] = [*nodes(), *borrowed(0)]
    objs += [
        pod(
            f"spot-{i}",
            group="spot",
            cpu="1",
            node_name="revocable",
            phase="Running",
            annotations={ZONE: "*"},
            labels={"app": "spot"},
        )
        for i in range(3)
    ]
    state = state_of([*objs, podgroup("clock", created=NOON)])
    state.add(budget)
    text = policy_text(
        "enqueue, allocate, shuffle",
        ["priority", "gang", "pdb"],
        ["predicates", "tdm"],
        arguments={"tdm": SHUFFLE},
    )
    reg = Registry.from_entry_points()
    sim = simulate(
        state, load_policy(text, reg), reg, scheduler_names=["volcano"], cycles=4, period=60.0
    )
    assert evicted_per_cycle(sim) == [[], [], [], []]
