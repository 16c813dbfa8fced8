"""`make demo` tells one story: the pending pod's reason reads the same in `simulate`'s pod
line, in its PodGroup's condition and in `explain`'s verdict, and explain's table shows the
very reasons those counts add up.

The commands are read from the Makefile's demo recipe, so the test runs what users run.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from caldera.cli import main

ROOT = Path(__file__).resolve().parents[2]
HISTOGRAM = re.compile(r"0/(\d+) nodes are available: (.*)\.$")


def demo_commands() -> list[list[str]]:
    """The argument lists of the ``caldera`` commands ``make demo`` runs."""
    recipe = ROOT.joinpath("Makefile").read_text().split("\ndemo:", 1)[1]
    commands = []
    for line in recipe.splitlines()[1:]:
        if not line.startswith("\t"):
            break
        words = shlex.split(line.strip())
        if words and words[0].endswith("/caldera"):
            commands.append([w if not w.endswith("/") else str(ROOT / w) for w in words[1:]])
    return commands


def counts(text: str) -> Counter[str]:
    """``<n> <reason>`` entries of a ``0/N nodes are available: …`` message."""
    found = HISTOGRAM.search(text)
    assert found is not None, text
    out: Counter[str] = Counter()
    for part in found.group(2).split(", "):
        n, reason = part.split(" ", 1)
        out[reason] += int(n)
    return out


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main([*argv, "--output", "json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_the_demo_gives_one_reason_counted_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    simulate, explain = demo_commands()
    assert simulate[0] == "simulate" and explain[0] == "explain"
    pod = explain[-2]
    sim = run(capsys, simulate)
    why = sim["unschedulable"][pod]
    group = sim["podGroups"][pod.rsplit("-", 1)[0]]  # climate-sim-0's gang: climate-sim
    (condition,) = [c["message"] for c in group["conditions"] if c["type"] == "Unschedulable"]
    ex = run(capsys, explain)

    assert ex["verdict"] == f"Unschedulable: {why}"  # explain says what the pod says
    assert condition.endswith(f"Origin reason is {pod.split('/')[1]}: {why}")  # and its group
    # the table shows every reason counted, each node under its own reasons only
    shown: Counter[str] = Counter()
    for node in ex["nodes"].values():
        for reasons in node["reasons"].values():
            shown.update(reasons)
    assert shown == counts(why)
    assert int(HISTOGRAM.search(why).group(1)) == len(ex["nodes"])  # type: ignore[union-attr]


def test_the_demos_table_prints_the_verdict_once(capsys: pytest.CaptureFixture[str]) -> None:
    _, explain = demo_commands()
    assert main(explain) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "nodes are available" in line] == [lines[1]]
    assert lines[1].startswith("verdict: Unschedulable: 0/7 nodes are available: ")
