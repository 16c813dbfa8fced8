"""The rules that combine plugin answers across tiers (Volcano's ``session_plugins.go``).

Points are built directly: a layout of tiers (lists of plugin names) and an ``enabled`` switch.
Every registered function records its plugin's name when called, so each case checks both the
combined answer and which plugins were asked (later tiers must not be consulted once a tier
decides).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import builders
from caldera.api.job import Job
from caldera.framework import points as rules
from caldera.framework.interfaces import EventHandler
from caldera.framework.points import ABSTAIN, PERMIT, POINT_FLAGS, REJECT, OrderPoint, Point

# Two tiers of three plugins: tier 0 = a, b, e; tier 1 = c, d, f.
from caldera.framework.session import Session

LAYOUT = [["a", "b", "e"], ["c", "d", "f"]]


def everything_on(plugin: str, point: str) -> bool:
    return True


def point_with(
    answers: Sequence[tuple[str, Any]], calls: list[str], layout: Sequence[Sequence[str]] = LAYOUT
) -> Point[Callable[..., Any]]:
    """A point where each plugin answers its value (whatever the arguments) and logs its call."""
    point: Point[Callable[..., Any]] = Point("p", layout, everything_on)
    for name, value in answers:

        def fn(*_args: Any, name: str = name, value: Any = value) -> Any:
            calls.append(name)
            return value

        point.add(name, fn)
    return point


# -- all_true / any_true / call_all / concat ------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], True, [], id="with no function registered everything is allowed"),
        pytest.param(
            [("a", True), ("c", True)], True, ["a", "c"], id="every plugin in every tier agrees"
        ),
        pytest.param(
            [("a", True), ("b", False), ("c", True)],
            False,
            ["a", "b"],
            id="one false answer is final and later plugins are not asked",
        ),
        pytest.param(
            [("a", True), ("f", False)],
            False,
            ["a", "f"],
            id="a false answer in a later tier counts",
        ),
    ],
)
def test_all_true_needs_every_plugin(
    answers: list[tuple[str, bool]], expected: bool, asked: list[str]
) -> None:
    calls: list[str] = []
    assert rules.all_true(point_with(answers, calls), "queue", "task") is expected
    assert calls == asked


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], False, [], id="with no function registered nothing is overused"),
        pytest.param(
            [("a", False), ("c", False)], False, ["a", "c"], id="no plugin says so: not overused"
        ),
        pytest.param(
            [("a", False), ("c", True), ("d", False)],
            True,
            ["a", "c"],
            id="one true answer in any tier is enough",
        ),
    ],
)
def test_any_true_needs_one_plugin(
    answers: list[tuple[str, bool]], expected: bool, asked: list[str]
) -> None:
    calls: list[str] = []
    assert rules.any_true(point_with(answers, calls), "queue") is expected
    assert calls == asked


def test_call_all_notifies_every_plugin_in_policy_order() -> None:
    calls: list[str] = []
    # Registration order is d, a, c; the policy's tier order decides the call order.
    rules.call_all(point_with([("d", None), ("a", None), ("c", None)], calls), "job")
    assert calls == ["a", "c", "d"]


def test_concat_keeps_every_rejection_of_every_plugin() -> None:
    calls: list[str] = []
    point = point_with([("c", ["c1"]), ("a", ["a1", "a2"]), ("b", []), ("d", ["d1"])], calls)
    assert rules.concat(point, "task") == ["a1", "a2", "c1", "d1"]
    assert calls == ["a", "b", "c", "d"]


# -- vote (job pipelined, job enqueueable) --------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], True, [], id="with no voter the job passes"),
        pytest.param([("a", REJECT)], False, ["a"], id="a reject in the first tier rejects"),
        pytest.param(
            [("a", PERMIT), ("b", REJECT)],
            False,
            ["a", "b"],
            id="a reject beside a permit in the same tier rejects",
        ),
        pytest.param(
            [("a", REJECT), ("b", PERMIT)],
            False,
            ["a"],
            id="a reject is final at once and later voters are not asked",
        ),
        pytest.param(
            [("a", PERMIT), ("c", REJECT)],
            True,
            ["a"],
            id="a permit decides its tier even if a later tier would reject",
        ),
        pytest.param(
            [("a", ABSTAIN), ("b", PERMIT), ("c", REJECT)],
            True,
            ["a", "b"],
            id="one permit among abstentions decides the tier",
        ),
        pytest.param(
            [("a", ABSTAIN), ("c", REJECT)],
            False,
            ["a", "c"],
            id="when a whole tier abstains the next tier votes and may reject",
        ),
        pytest.param(
            [("a", ABSTAIN), ("b", ABSTAIN), ("c", PERMIT)],
            True,
            ["a", "b", "c"],
            id="when a whole tier abstains the next tier votes and may permit",
        ),
        pytest.param(
            [("a", ABSTAIN), ("c", ABSTAIN)],
            True,
            ["a", "c"],
            id="when no tier decides the job passes",
        ),
        pytest.param(
            [("a", 7), ("c", -3)], True, ["a"], id="any positive number counts as a permit"
        ),
    ],
)
def test_vote(answers: list[tuple[str, int]], expected: bool, asked: list[str]) -> None:
    calls: list[str] = []
    assert rules.vote(point_with(answers, calls), "job") is expected
    assert calls == asked


# -- first_tier (job starving) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "default", "expected", "asked"),
    [
        pytest.param([], False, False, [], id="with no function the job is not starving"),
        pytest.param([], True, True, [], id="with no function the given default is the answer"),
        pytest.param(
            [("a", True), ("b", True)], False, True, ["a", "b"], id="the whole first tier agrees"
        ),
        pytest.param(
            [("a", True), ("b", False)],
            False,
            False,
            ["a", "b"],
            id="one false in the deciding tier makes it false",
        ),
        pytest.param(
            [("a", True), ("c", False)],
            False,
            True,
            ["a"],
            id="the first tier with functions decides and later tiers are not asked",
        ),
        pytest.param(
            [("a", False), ("c", True)],
            True,
            False,
            ["a"],
            id="a false first tier is final even if a later tier says true",
        ),
        pytest.param(
            [("d", True), ("f", True)],
            False,
            True,
            ["d", "f"],
            id="a tier without functions is skipped",
        ),
    ],
)
def test_first_tier(
    answers: list[tuple[str, bool]], default: bool, expected: bool, asked: list[str]
) -> None:
    calls: list[str] = []
    assert rules.first_tier(point_with(answers, calls), "job", default=default) is expected
    assert calls == asked


# -- first_result (job valid, pre-predicate) ------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], None, [], id="with no function everything passes"),
        pytest.param(
            [("a", None), ("c", None)], None, ["a", "c"], id="when every function passes: None"
        ),
        pytest.param(
            [("a", None), ("b", "gang too small"), ("c", "no quota")],
            "gang too small",
            ["a", "b"],
            id="the first failure is the answer and later functions are not asked",
        ),
        pytest.param(
            [("c", "no quota"), ("a", "gang too small")],
            "gang too small",
            ["a"],
            id="policy order, not registration order, decides which failure is first",
        ),
    ],
)
def test_first_result(answers: list[tuple[str, Any]], expected: Any, asked: list[str]) -> None:
    calls: list[str] = []
    assert rules.first_result(point_with(answers, calls), "job") == expected
    assert calls == asked


# -- intersection (preemptable, reclaimable) ------------------------------------------------------


@dataclass(eq=False)
class Victim:
    name: str


CANDIDATES = [Victim("x"), Victim("y"), Victim("z")]
BY_NAME = {v.name: v for v in CANDIDATES}


def victim_point(
    answers: Sequence[tuple[str, str, int]], calls: list[str]
) -> Point[Callable[..., Any]]:
    """``(plugin, victim names, verdict)``: the plugin picks those candidates with that verdict."""
    point: Point[Callable[..., Any]] = Point("preemptable", LAYOUT, everything_on)
    for plugin, names, verdict in answers:

        def fn(
            actor: str,
            candidates: Sequence[Victim],
            plugin: str = plugin,
            names: str = names,
            verdict: int = verdict,
        ) -> tuple[list[Victim], int]:
            assert actor == "preemptor"
            assert list(candidates) == CANDIDATES
            calls.append(plugin)
            return [BY_NAME[n] for n in names], verdict

        point.add(plugin, fn)
    return point


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], None, [], id="with no voting plugin there is no decision"),
        pytest.param(
            [("a", "xyz", PERMIT)], "xyz", ["a"], id="a single voter's victims are the answer"
        ),
        pytest.param(
            [("a", "xyz", PERMIT), ("b", "zy", PERMIT), ("e", "yz", PERMIT)],
            "yz",
            ["a", "b", "e"],
            id="within a tier the victims are the intersection in the first voter's order",
        ),
        pytest.param(
            [("a", "x", ABSTAIN), ("b", "yz", PERMIT)],
            "yz",
            ["a", "b"],
            id="an abstaining plugin's answer is skipped",
        ),
        pytest.param(
            [("a", "x", ABSTAIN), ("b", "", ABSTAIN), ("c", "z", PERMIT)],
            "z",
            ["a", "b", "c"],
            id="a tier where every plugin abstains leaves the decision to the next tier",
        ),
        pytest.param(
            [("a", "x", PERMIT), ("c", "y", PERMIT)],
            "x",
            ["a"],
            id="the first tier with victims decides and later tiers are not consulted",
        ),
        pytest.param(
            [("a", "", PERMIT), ("b", "xy", PERMIT), ("c", "z", PERMIT)],
            "z",
            ["a", "c"],
            id="an empty answer ends its tier undecided and the next tier is asked",
        ),
        pytest.param(
            [("a", "x", PERMIT), ("b", "y", PERMIT), ("e", "xyz", PERMIT), ("c", "z", PERMIT)],
            "z",
            ["a", "b", "c"],
            id="an intersection that runs empty ends its tier and is not refilled by a later voter",
        ),
        pytest.param(
            [("a", "", PERMIT), ("c", "xy", PERMIT), ("d", "", PERMIT)],
            None,
            ["a", "c", "d"],
            id="when no tier produces victims the answer is None",
        ),
    ],
)
def test_intersection(
    answers: list[tuple[str, str, int]], expected: str | None, asked: list[str]
) -> None:
    calls: list[str] = []
    result = rules.intersection(victim_point(answers, calls), "preemptor", CANDIDATES)
    assert (None if result is None else "".join(v.name for v in result)) == expected
    assert calls == asked


def test_intersection_matches_victims_by_identity_not_equality() -> None:
    twin = Victim("x")  # same name, different task
    point: Point[Callable[..., Any]] = Point("preemptable", LAYOUT, everything_on)
    point.add("a", lambda _p, _c: ([BY_NAME["x"], BY_NAME["y"]], PERMIT))
    point.add("b", lambda _p, _c: ([twin, BY_NAME["y"]], PERMIT))
    assert rules.intersection(point, "preemptor", CANDIDATES) == [BY_NAME["y"]]


# -- union (victim tasks) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], "", [], id="with no plugin there are no victims"),
        pytest.param(
            [("a", "xy"), ("b", "yz")],
            "xyz",
            ["a", "b"],
            id="within a tier the victims are the union without duplicates",
        ),
        pytest.param(
            [("a", "x"), ("c", "z")],
            "x",
            ["a"],
            id="the first non-empty tier wins and later tiers are not consulted",
        ),
        pytest.param(
            [("a", ""), ("b", ""), ("c", "z"), ("d", "y")],
            "zy",
            ["a", "b", "c", "d"],
            id="an empty tier passes the choice to the next tier",
        ),
        pytest.param([("a", ""), ("c", "")], "", ["a", "c"], id="no tier has victims: empty list"),
    ],
)
def test_union(answers: list[tuple[str, str]], expected: str, asked: list[str]) -> None:
    calls: list[str] = []
    point = point_with([(p, [BY_NAME[n] for n in names]) for p, names in answers], calls)
    assert "".join(v.name for v in rules.union(point, CANDIDATES)) == expected
    assert calls == asked


# -- first_nonzero and OrderPoint (job, queue, task order) ----------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected", "asked"),
    [
        pytest.param([], 0, [], id="with no comparison the two are equal"),
        pytest.param([("a", -1), ("b", 1)], -1, ["a"], id="the first non-zero comparison wins"),
        pytest.param(
            [("a", 0), ("b", 0), ("c", 1), ("d", -1)],
            1,
            ["a", "b", "c"],
            id="when the first tier ties the next tier decides",
        ),
        pytest.param([("a", 0), ("c", 0)], 0, ["a", "c"], id="when every plugin ties: zero"),
    ],
)
def test_first_nonzero(answers: list[tuple[str, int]], expected: int, asked: list[str]) -> None:
    calls: list[str] = []
    assert rules.first_nonzero(point_with(answers, calls), "left", "right") == expected
    assert calls == asked


@dataclass(frozen=True)
class Item:
    name: str
    group: int
    prio: int
    created: float


ITEMS = [
    Item("p", group=2, prio=1, created=5.0),
    Item("q", group=1, prio=1, created=4.0),
    Item("r", group=1, prio=3, created=3.0),
    Item("s", group=2, prio=3, created=2.0),
    Item("t", group=1, prio=3, created=1.0),
]


def by_created(item: Item) -> float:
    return item.created


def cmp_of(key: Callable[[Item], Any]) -> Callable[[Item, Item], int]:
    def cmp(left: Item, right: Item) -> int:
        a, b = key(left), key(right)
        return -1 if a < b else (1 if a > b else 0)

    return cmp


def higher_prio_first(item: Item) -> int:
    return -item.prio


def by_group(item: Item) -> int:
    return item.group


# (plugin, "key" | "cmp", key function): a cmp registration compares by the same key.
Registration = tuple[str, str, Callable[[Item], Any]]


def order_point(registrations: Sequence[Registration]) -> OrderPoint[Item]:
    point: OrderPoint[Item] = OrderPoint("job_order", LAYOUT, everything_on)
    for plugin, kind, key in registrations:
        if kind == "key":
            point.add_key(plugin, key)
        else:
            point.add_cmp(plugin, cmp_of(key))
    return point


@pytest.mark.parametrize(
    ("registrations", "expected"),
    [
        pytest.param([], "tsrqp", id="with no registration the fallback alone orders"),
        pytest.param(
            [("a", "key", higher_prio_first)],
            "tsrqp",
            id="a key registration orders and the fallback breaks its ties",
        ),
        pytest.param(
            [("a", "cmp", higher_prio_first)],
            "tsrqp",
            id="a cmp registration orders and the fallback breaks its ties",
        ),
        pytest.param(
            [("a", "key", by_group), ("b", "key", higher_prio_first)],
            "trqsp",
            id="two keys in one tier: the second breaks the first's ties",
        ),
        pytest.param(
            [("a", "key", by_group), ("c", "cmp", higher_prio_first)],
            "trqsp",
            id="a key then a cmp in a later tier: the later tier breaks ties",
        ),
        pytest.param(
            [("c", "key", by_group), ("a", "cmp", higher_prio_first)],
            "trsqp",
            id="the earlier tier comes first whatever the registration order",
        ),
        pytest.param(
            [("a", "cmp", lambda i: 0), ("c", "key", by_group)],
            "trqsp",
            id="a comparison that always ties passes the decision to the next tier",
        ),
    ],
)
def test_order_point_sort_key(registrations: list[Registration], expected: str) -> None:
    point = order_point(registrations)
    ordered = sorted(ITEMS, key=point.sort_key(by_created))
    assert "".join(i.name for i in ordered) == expected


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param([higher_prio_first], id="one plugin"),
        pytest.param([by_group, higher_prio_first], id="two plugins in one tier"),
        pytest.param([by_group, lambda i: i.name], id="a string key"),
    ],
)
def test_key_and_cmp_registrations_give_the_same_order(keys: list[Callable[[Item], Any]]) -> None:
    plugins = ["a", "b", "c"]
    as_keys = order_point([(p, "key", k) for p, k in zip(plugins, keys, strict=False)])
    as_cmps = order_point([(p, "cmp", k) for p, k in zip(plugins, keys, strict=False)])
    assert sorted(ITEMS, key=as_keys.sort_key(by_created)) == sorted(
        ITEMS, key=as_cmps.sort_key(by_created)
    )
    for left in ITEMS:
        for right in ITEMS:
            assert as_keys.compare(left, right) == as_cmps.compare(left, right)


def test_order_point_compare_is_the_first_non_zero_comparison_without_fallback() -> None:
    point = order_point([("a", "key", by_group), ("c", "cmp", higher_prio_first)])
    p, q, r, s, t = ITEMS
    assert point.compare(q, p) == -1  # group decides
    assert point.compare(s, p) == -1  # same group: priority decides
    assert point.compare(p, s) == 1
    assert point.compare(r, t) == 0  # same group and priority: compare leaves it open
    assert sorted(ITEMS, key=functools.cmp_to_key(point.compare))[:2] == [r, t]


# -- enable flags ---------------------------------------------------------------------------------


def test_a_switched_off_registration_is_dropped() -> None:
    asked: list[tuple[str, str]] = []

    def enabled(plugin: str, point: str) -> bool:
        asked.append((plugin, point))
        return plugin != "b"

    point: Point[Callable[..., Any]] = Point("job_ready", LAYOUT, enabled)
    point.add("a", lambda job: True)
    point.add("b", lambda job: False)
    assert asked == [("a", "job_ready"), ("b", "job_ready")]
    assert len(point.tiers) == 1
    assert rules.all_true(point, "job") is True


def test_a_point_with_only_switched_off_registrations_is_empty() -> None:
    point: Point[Callable[..., Any]] = Point("overused", LAYOUT, lambda plugin, point: False)
    point.add("a", lambda queue: True)
    assert not point
    assert point.tiers == []
    assert rules.any_true(point, "queue") is False


SESSION_POINTS = [
    "job_order",
    "queue_order",
    "task_order",
    "job_valid",
    "job_enqueueable",
    "job_enqueued",
    "job_ready",
    "job_pipelined",
    "job_starving",
    "overused",
    "allocatable",
    "preemptive",
    "pre_predicate",
    "predicate",
    "simulate_predicate",
    "node_check",
    "node_order",
    "best_node",
    "preemptable",
    "reclaimable",
    "victim_tasks",
]


def session_point(ssn: Session, name: str) -> Point[Any]:
    point: Point[Any] = getattr(ssn, f"{name}_point")
    assert point.name == name
    return point


@pytest.mark.parametrize(
    ("flag", "switched"),
    [
        pytest.param(flag, points, id=f"{flag} false drops {' and '.join(points)}")
        for flag, points in POINT_FLAGS.items()
    ],
)
def test_an_enable_flag_set_false_drops_that_plugins_registrations(
    flag: str, switched: tuple[str, ...]
) -> None:
    ssn = builders.new_session(
        [],
        f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
    {flag}: false
  - name: priority
""",
    )
    for name in SESSION_POINTS:
        point = session_point(ssn, name)
        point.add("gang", "gang's function")
        point.add("priority", "priority's function")
        expected = ["priority's function"]
        if name not in switched:
            expected.insert(0, "gang's function")
        assert list(point) == expected, name


@pytest.mark.parametrize(
    ("flag", "points"),
    [
        pytest.param(
            "enablePredicate",
            {"predicate", "pre_predicate", "simulate_predicate", "node_check"},
            id="enablePredicate switches every node filter point",
        ),
        pytest.param(
            "enableJobEnqueued",
            {"job_enqueueable", "job_enqueued"},
            id="enableJobEnqueued switches both job enqueueable and job enqueued",
        ),
        pytest.param(
            "enableNodeOrder", {"node_order"}, id="enableNodeOrder switches node order only"
        ),
        pytest.param(
            "enabledOverused", {"overused"}, id="the 'enabled' prefix is spelled as Volcano does"
        ),
    ],
)
def test_point_flags_match_volcano(flag: str, points: set[str]) -> None:
    assert set(POINT_FLAGS[flag]) == points


def test_job_valid_and_event_handlers_have_no_switch() -> None:
    every_flag_off = "\n".join(f"    {flag}: false" for flag in POINT_FLAGS)
    ssn = builders.new_session(
        [],
        f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
{every_flag_off}
""",
    )
    handler = EventHandler(allocate=lambda task: None)

    def valid(job: Job) -> None:
        return None

    ssn.job_valid_point.add("gang", valid)
    ssn.event_handlers.add("gang", handler)
    assert list(ssn.job_valid_point) == [valid]
    assert list(ssn.event_handlers) == [handler]
    assert not any("job_valid" in pts or "event_handler" in pts for pts in POINT_FLAGS.values())


@pytest.mark.parametrize(
    ("predicates_option", "expected"),
    [
        pytest.param("", {}, id="with predicates on a cordoned node takes no pod"),
        pytest.param(
            "enablePredicate: false",
            {"default/p": "cordoned"},
            id="with enablePredicate false the predicates plugin filters nothing",
        ),
    ],
)
def test_enable_predicate_false_switches_the_plugins_filters_off_in_a_run(
    predicates_option: str, expected: dict[str, str]
) -> None:
    policy = f"""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
    {predicates_option}
"""
    sim = builders.scenario(
        [builders.node("cordoned", unschedulable=True), builders.pod("p")], policy_yaml=policy
    )
    assert builders.binds(sim) == expected


def told(name: str, calls: list[tuple[str, int, int]]) -> Callable[..., list[str]]:
    """A simulator that logs how many removed and added tasks it was told of, and refuses."""

    def fn(task: str, node: int, removed: Sequence[str], added: Sequence[str]) -> list[str]:
        calls.append((name, len(removed), len(added)))
        return [f"{name} refuses"]

    return fn


@pytest.mark.parametrize(
    ("options", "among", "expected"),
    [
        pytest.param(
            "", "all", [("gang", 1, 1), ("priority", 1, 1)], id="with the defaults all are told"
        ),
        pytest.param(
            "enablePreemptable: false\n    enabledAllocatable: false",
            "all",
            [("gang", 0, 0), ("priority", 1, 1)],
            id="neither enablePreemptable nor enabledAllocatable: asked, told nothing",
        ),
        pytest.param(
            "enablePreemptable: false",
            "all",
            [("gang", 1, 1), ("priority", 1, 1)],
            id="enabledAllocatable alone is enough to be told",
        ),
        pytest.param(
            "enabledAllocatable: false",
            "all",
            [("gang", 1, 1), ("priority", 1, 1)],
            id="enablePreemptable alone is enough to be told",
        ),
        pytest.param(
            "enablePreemptable: false\n    enabledAllocatable: false",
            "seeing",
            [("priority", 1, 1)],
            id="asking those told of the changes leaves the other out",
        ),
        pytest.param(
            "enablePreemptable: false\n    enabledAllocatable: false",
            "blind",
            [("gang", 0, 0)],
            id="asking those not told leaves the told out",
        ),
        pytest.param(
            "enablePredicate: false",
            "all",
            [("priority", 1, 1)],
            id="enablePredicate false: no say",
        ),
    ],
)
def test_simulators_are_told_of_changes_as_volcano_session_simulate_remove_task_fn(
    options: str, among: rules.Among, expected: list[tuple[str, int, int]]
) -> None:
    # Session.SimulateRemoveTaskFn / SimulateAddTaskFn skip a plugin with neither
    # enablePreemptable nor enabledAllocatable; SimulatePredicateFn asks every enablePredicate
    ssn = builders.new_session(
        [builders.node("n1"), builders.podgroup("g"), builders.pod("t", group="g")],
        f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
    {options or "enableJobOrder: true"}
  - name: priority
""",
    )
    calls: list[tuple[str, int, int]] = []
    ssn.simulate_predicate_point.add("gang", told("gang", calls))
    ssn.simulate_predicate_point.add("priority", told("priority", calls))
    task = builders.task_named(ssn, "t")
    reasons = ssn.simulate_predicate(task, 0, removed=[task], added=[task], among=among)
    assert calls == expected
    assert reasons == [f"{name} refuses" for name, _, _ in expected]
