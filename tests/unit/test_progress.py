"""The progress line: on a terminal it shows what a long run is doing; anywhere else, nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from caldera.cli import main
from caldera.framework.policy import default_policy
from caldera.framework.registry import Registry
from caldera.simulate.explain import explain
from caldera.simulate.manifests import load_manifests
from caldera.simulate.progress import Progress
from caldera.simulate.runner import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ERASE = "\r\x1b[K"


def test_a_stream_that_is_not_a_terminal_gets_nothing() -> None:
    stream = io.StringIO()  # isatty() is False
    progress = Progress(stream)
    progress.show("reading manifests: file 1/2")
    progress.clear()
    assert not progress.enabled
    assert stream.getvalue() == ""


def test_on_a_terminal_each_line_replaces_the_last_and_is_erased_at_the_end() -> None:
    stream = io.StringIO()
    progress = Progress(stream, tty=True)
    progress.show("cycle 1/2")
    progress.show("cycle 2/2")
    progress.clear()
    progress.clear()  # nothing shown any more: nothing to erase
    assert stream.getvalue() == f"{ERASE}cycle 1/2{ERASE}cycle 2/2{ERASE}"


def test_without_a_stream_progress_is_silent() -> None:
    progress = Progress(None, tty=True)
    progress.show("anything")
    assert not progress.enabled


def test_reading_manifests_on_a_terminal_counts_the_files() -> None:
    stream = io.StringIO()
    loaded = load_manifests([str(EXAMPLES)], Progress(stream, tty=True))
    files = sorted(EXAMPLES.glob("*.yaml"))
    shown = stream.getvalue().split(ERASE)
    assert f"reading manifests: file {len(files)}/{len(files)}, " in shown[-2]
    assert shown[-1] == ""  # erased before the warnings print
    assert loaded.state.pods


def test_each_cycle_shows_on_a_terminal_with_the_pods_bound_so_far() -> None:
    loaded = load_manifests([str(EXAMPLES)])
    registry = Registry.from_entry_points()
    stream = io.StringIO()
    sim = simulate(
        loaded.state,
        default_policy(registry),
        registry,
        scheduler_names=["volcano"],
        cycles=2,
        progress=Progress(stream, tty=True),
    )
    first = len(sim.cycles[0].result.binds)
    assert first > 0
    shown = [line for line in stream.getvalue().split(ERASE) if line]
    assert shown[0] == "cycle 1/2 (0 pods bound so far): building the snapshot"
    assert f"cycle 2/2 ({first:,} pods bound so far): building the snapshot" in shown
    assert stream.getvalue().endswith(ERASE)


def test_the_command_line_prints_no_progress_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--cycles", "2", str(EXAMPLES)]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    assert "reading manifests" not in err
    assert "cycle 1/2" not in err


def test_explain_shows_its_session_and_then_the_explaining_on_a_terminal() -> None:
    loaded = load_manifests([str(EXAMPLES)])
    registry = Registry.from_entry_points()
    stream = io.StringIO()
    explain(
        loaded.state,
        default_policy(registry),
        registry,
        "production/climate-sim-0",
        scheduler_names=["volcano"],
        progress=Progress(stream, tty=True),
    )
    shown = [line for line in stream.getvalue().split(ERASE) if line]
    assert shown[0] == "cycle 1/1 (0 pods bound so far): building the snapshot"
    assert shown[-1] == "explaining production/climate-sim-0: every node's filters and scores"
    assert stream.getvalue().endswith(ERASE)
