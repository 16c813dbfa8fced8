"""Every example under ``examples/devices/`` decides what its ``expected.json`` says, run through
``caldera simulate --strict`` as a user would run it: where each pod goes, and the device
annotations it is bound with (what the vendor's device plugin reads)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_plugin_examples import simulated

from caldera.cli import main

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


@pytest.mark.parametrize("example", DIRECTORIES, ids=lambda p: p.name)
def test_explain_names_each_card_tried_and_why_it_refused_the_waiting_pod(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, _ = simulated(example, capsys)
    waiting = list(result["unschedulable"])
    assert waiting, f"{example.name} shows no pod waiting for a card, and why"
    policy, cluster = example / "volcano-scheduler.conf", example / "cluster.yaml"
    cards = {(row["node"], row["id"]) for row in result["devices"]}
    for pod in waiting:
        argv = ["explain", "--output", "json", "--policy", str(policy), pod, str(cluster)]
        assert main(argv) == 0, capsys.readouterr().err
        doc = json.loads(capsys.readouterr().out)
        refused = {
            node: seen["reasons"]["deviceshare"][0]
            for node, seen in doc["nodes"].items()
            if "deviceshare" in seen["reasons"]
        }
        assert refused, (pod, doc["nodes"])
        listed = 0
        for node, why in refused.items():
            if "(" not in why:  # none of the vendor's cards there: HAMi's count alone
                assert re.fullmatch(r"\d+/0 NodeInsufficientDevice", why), (pod, why)
                continue
            for entry in why[why.index("(") + 1 : -1].split("; "):
                card, _, verdict = entry.partition(": ")
                assert (node, card) in cards, (pod, entry)
                assert verdict == "has room" or re.fullmatch(r"[A-Z]\w+(, [A-Z]\w+)*", verdict)
                listed += 1
        assert listed, (pod, refused)  # some node says, card by card, why
