"""The ClusterRole for `caldera explain`/`simulate --kubeconfig`: list on what the scheduler
reads, nothing more."""

from __future__ import annotations

from pathlib import Path

import yaml

from caldera.models.kinds import KINDS

READER = Path(__file__).resolve().parents[2] / "manifests" / "extra" / "caldera-reader-rbac.yaml"


def test_the_reader_may_list_exactly_the_kinds_the_scheduler_reads_and_do_nothing_else() -> None:
    (role,) = list(yaml.safe_load_all(READER.read_text(encoding="utf-8")))
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "caldera-reader")
    granted: set[tuple[str, str, str]] = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        granted |= {
            (group, resource, verb)
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
    assert granted == {(kind.group, kind.plural, "list") for kind in KINDS.values()}
