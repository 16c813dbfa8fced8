"""Every example under ``examples/devices/`` decides what its ``expected.json`` says, run through
``caldera simulate --strict`` as a user would run it: where each pod goes, and the device
annotations it is bound with (what the vendor's device plugin reads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_plugin_examples import simulated

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "devices"
DIRECTORIES = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


def test_there_are_examples() -> None:
    assert [d.name for d in DIRECTORIES], "examples/devices/ has no example"


@pytest.mark.parametrize("example", DIRECTORIES, ids=lambda p: p.name)
def test_the_device_example_decides_what_it_says(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, expected = simulated(example, capsys)
    assert {b["pod"]: b["node"] for b in result["binds"]} == expected["bound"]
    for pod, wanted in expected["annotations"].items():
        got = result["pods"][pod]["annotations"]
        assert {key: got.get(key) for key in wanted} == wanted, pod
    assert f"`{example.name}`" in (EXAMPLES / "README.md").read_text()
