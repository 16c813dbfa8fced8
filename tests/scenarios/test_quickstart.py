"""The README's quick start works as written: its manifests load, and on a small cluster the gang
Job starts whole while the too-big one waits saying why.

The Job controller is not here, so the test makes each Job's pods from its template, as the
controller would (``parallelism`` pods named ``<job>-<i>``, owned by the Job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builders import Obj, binds, node, scenario, summary
from caldera.models.core import Pod
from caldera.models.parse import parse_object
from caldera.models.volcano import PodGroup, Queue

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(QUICKSTART.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def pods_of(job: dict[str, Any]) -> list[Obj]:
    template = job["spec"]["template"]
    out: list[Obj] = []
    for i in range(job["spec"]["parallelism"]):
        raw = {
            "metadata": {
                **template["metadata"],
                "name": f"{job['metadata']['name']}-{i}",
                "namespace": job["metadata"]["namespace"],
                "uid": f"{job['metadata']['name']}-{i}",
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        obj = parse_object("Pod", raw)
        assert isinstance(obj, Pod), obj
        out.append(obj)
    return out


def cluster_objects() -> list[Obj]:
    objs: list[Obj] = [node(f"kind-worker-{i}", cpu="2", memory="4Gi") for i in range(2)]
    for doc in documents():
        if doc["kind"] == "Job":
            objs += pods_of(doc)
        else:
            obj = parse_object(doc["kind"], doc)
            assert isinstance(obj, PodGroup | Queue), obj
            objs.append(obj)
    return objs


def test_the_quick_start_gang_starts_whole_and_the_too_big_one_says_why() -> None:
    sim = scenario(cluster_objects())
    assert sorted(p for p in binds(sim) if "hello-gang" in p) == [
        f"default/hello-gang-{i}" for i in range(3)
    ]
    reasons = summary(sim)["unschedulable"]
    assert reasons["default/too-big-0"] == "0/2 nodes are available: 2 Insufficient cpu."
