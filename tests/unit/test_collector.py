"""The garbage collector in a batch command: off while it reads and schedules, what it read
frozen, each simulated cycle's garbage collected before the next."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from caldera.cli import main
from caldera.collector import batch_process, between_cycles, keep_what_is_read
from caldera.framework.policy import default_policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session
from caldera.simulate.manifests import load_manifests
from caldera.simulate.runner import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Cyclic:
    """An object only the cyclic collector can free."""

    def __init__(self) -> None:
        self.me = self


def sessions_alive() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Session))


def test_a_batch_process_collects_nothing_by_itself() -> None:
    batch_process()
    assert not gc.isenabled()
    garbage = Cyclic()
    alive = weakref.ref(garbage)
    del garbage
    made = [[i] for i in range(200_000)]  # far past every threshold
    assert len(made) == 200_000
    assert alive() is not None


def test_what_is_read_is_frozen_in_a_batch_process_only() -> None:
    keep_what_is_read()
    assert gc.get_freeze_count() == 0
    batch_process()
    keep_what_is_read()
    assert gc.get_freeze_count() > 0


def test_between_cycles_frees_the_garbage_of_the_last_cycle() -> None:
    batch_process()
    garbage = Cyclic()
    alive = weakref.ref(garbage)
    del garbage
    between_cycles()
    assert alive() is None


def test_a_simulation_of_many_cycles_keeps_no_session_but_the_last() -> None:
    loaded = load_manifests([str(EXAMPLES)])
    registry = Registry.from_entry_points()
    gc.collect()
    before = sessions_alive()
    batch_process()
    keep_what_is_read()
    simulate(
        loaded.state, default_policy(registry), registry, scheduler_names=["volcano"], cycles=4
    )
    # the last cycle's session is garbage too, but nothing collects after it: the command ends
    assert sessions_alive() - before == 1


def test_the_command_line_runs_as_a_batch_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES)]) == 0
    capsys.readouterr()
    assert not gc.isenabled()
    assert gc.get_freeze_count() > 0
