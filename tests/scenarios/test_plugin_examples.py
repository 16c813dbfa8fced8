"""Every example under ``examples/plugins/`` decides what its ``expected.json`` says, run through
``caldera simulate --strict`` (so its policy loads without a warning) as a user would run it, in
UTC (tdm's windows are local time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from caldera.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
DIRECTORIES = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


pytestmark = pytest.mark.usefixtures("utc")


def test_there_are_examples() -> None:
    assert [d.name for d in DIRECTORIES], "examples/plugins/ has no example"


def simulated(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``caldera simulate --strict`` on an example directory: its JSON result, and what the
    example's ``expected.json`` says."""
    policy, cluster = example / "volcano-scheduler.conf", example / "cluster.yaml"
    argv = ["simulate", "--strict", "--output", "json", "--policy", str(policy), str(cluster)]
    assert main(argv) == 0, capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    expected: dict[str, Any] = json.loads((example / "expected.json").read_text())
    return result, expected


@pytest.mark.parametrize("example", DIRECTORIES, ids=lambda p: p.name)
def test_the_example_decides_what_it_says(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, expected = simulated(example, capsys)
    assert sorted(b["pod"] for b in result["binds"]) == sorted(expected["bound"])
    assert sorted(e["pod"] for e in result["evictions"]) == sorted(expected.get("evicted", []))
    phases = {key: pg["phase"] for key, pg in result["podGroups"].items()}
    assert phases == expected["phases"]
    for pod, wanted in expected.get("annotations", {}).items():
        got = result["pods"][pod]["annotations"]
        assert {key: got.get(key) for key in wanted} == wanted, pod
    assert example.name in (EXAMPLES / "README.md").read_text()
