"""The operator's memories: news sent once, problems told once they last."""

from __future__ import annotations

import pytest

from caldera.operator.memo import Lasting, Recent


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_same_value_is_sent_once_until_it_goes_stale() -> None:
    clock = Clock()
    recent = Recent(ttl=10, clock=clock)
    assert recent.fresh("pg/a", "Running")
    assert not recent.fresh("pg/a", "Running")
    assert recent.fresh("pg/b", "Running")
    clock.now = 11
    assert recent.fresh("pg/a", "Running")


def test_what_has_gone_stale_is_forgotten_not_kept_for_every_key_there_ever_was() -> None:
    clock = Clock()
    recent = Recent(ttl=10, clock=clock)
    for i in range(100):
        assert recent.fresh(f"pod/{i}", "Scheduled")
    clock.now = 5
    assert recent.fresh("pod/new", "Scheduled")
    assert len(recent) == 101  # nothing stale yet
    clock.now = 10.5
    assert not recent.fresh("pod/new", "Scheduled")  # still fresh: kept
    assert len(recent) == 1  # dropped within a quarter of the ttl of going stale


def test_a_changed_value_is_sent_at_once() -> None:
    recent = Recent(ttl=10, clock=Clock())
    assert recent.fresh("pg/a", "Inqueue")
    assert recent.fresh("pg/a", "Running")
    assert recent.fresh("pg/a", "Inqueue")


NO_PODGROUP = "pod a has no PodGroup"


@pytest.mark.parametrize(
    ("grace", "steps"),
    [
        pytest.param(
            30,
            [
                (0, [NO_PODGROUP], []),
                (29, [NO_PODGROUP], []),
                (31, [], []),
                (31, [NO_PODGROUP], []),
            ],
            id="a problem that fixes itself within the grace is never told",
        ),
        pytest.param(
            30,
            [
                (0, ["x", "y"], []),
                (30, ["x", "y", "z"], ["x", "y"]),
                (100, ["x", "y", "z"], ["z"]),
                (100, ["x", "y", "z"], []),
            ],
            id="a lasting problem is told exactly once",
        ),
        pytest.param(
            5,
            [(0, ["x"], []), (5, ["x"], ["x"]), (6, [], []), (6, ["x"], []), (11, ["x"], ["x"])],
            id="a problem that comes back is timed and told again",
        ),
    ],
)
def test_a_problem_is_told_once_it_has_lasted_the_grace(
    grace: float, steps: list[tuple[float, list[str], list[str]]]
) -> None:
    """Each step: the clock's time, the problems seen then, and those told."""
    clock = Clock()
    lasting = Lasting(grace=grace, clock=clock)
    for now, seen, told in steps:
        clock.now = now
        assert lasting.seen(seen) == told, f"at {now}: {seen}"


def test_many_objects_with_the_same_problem_make_one_line_naming_a_few() -> None:
    from caldera.models.parse import ObjectError
    from caldera.operator.loop.scheduler import by_condition

    problems = [
        ObjectError("Pod", f"default/p{i}", "PodGroup default/missing does not exist")
        for i in range(4075)
    ] + [ObjectError("PodGroup", "default/g", "spec.queue: queue 'gone' does not exist")]
    lines = by_condition(problems)
    assert lines == {
        "Pod: PodGroup default/missing does not exist": (
            "default/p0, default/p1, default/p2 and 4072 more"
        ),
        (
            "PodGroup (podgroups.scheduling.volcano.sh): spec.queue: queue 'gone' does not exist"
        ): "default/g",
    }
