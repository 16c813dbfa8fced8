"""The operator's memories: news sent once, problems told once they last."""

from __future__ import annotations

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


def test_a_problem_that_fixes_itself_within_the_grace_is_never_told() -> None:
    clock = Clock()
    lasting = Lasting(grace=30, clock=clock)
    assert lasting.seen(["pod a has no PodGroup"]) == []
    clock.now = 29
    assert lasting.seen(["pod a has no PodGroup"]) == []
    clock.now = 31
    assert lasting.seen([]) == []
    assert lasting.seen(["pod a has no PodGroup"]) == []


def test_a_lasting_problem_is_told_exactly_once() -> None:
    clock = Clock()
    lasting = Lasting(grace=30, clock=clock)
    lasting.seen(["x", "y"])
    clock.now = 30
    assert lasting.seen(["x", "y", "z"]) == ["x", "y"]
    clock.now = 100
    assert lasting.seen(["x", "y", "z"]) == ["z"]
    assert lasting.seen(["x", "y", "z"]) == []


def test_a_problem_that_comes_back_is_timed_and_told_again() -> None:
    clock = Clock()
    lasting = Lasting(grace=5, clock=clock)
    lasting.seen(["x"])
    clock.now = 5
    assert lasting.seen(["x"]) == ["x"]
    clock.now = 6
    assert lasting.seen([]) == []
    assert lasting.seen(["x"]) == []
    clock.now = 11
    assert lasting.seen(["x"]) == ["x"]


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
